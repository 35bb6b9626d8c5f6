"""`argym eval`: score an agent on an env's split, print it, save it, submit it."""

from __future__ import annotations

import json
from typing import Any

import click

from argym.callables import import_modules
from argym.cli.app import cli
from argym.cli.common import console, fail, import_option, parse_kwargs, user_errors
from argym.cli.transcripts import print_transcript
from argym.errors import ArgymError
from argym.files import write_atomic


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
@click.option(
    "--show",
    type=int,
    default=0,
    metavar="N",
    help="Print the first N episodes' transcripts (what the model wrote, the env's replies, the verdict).",
)
@click.option("--submit", is_flag=True, help="Submit the result to the local leaderboard (`argym board`).")
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Leaderboard file for --submit (default: $ARGYM_LEADERBOARD, else "
    "~/.local/share/argym/leaderboard.sqlite).",
)
@import_option
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
    show: int,
    submit: bool,
    db: str | None,
    imports: tuple[str, ...],
) -> None:
    """Evaluate an agent on ENV_ID's split, in order, and print the score.

    ENV_KWARGS are the env's key=value arguments, e.g. tasks=file.jsonl max_attempts=3.
    """
    from argym.agents.evaluate import evaluate
    from argym.agents.policy import SamplingParams

    with user_errors():
        import_modules(imports)
        kwargs = parse_kwargs(env_kwargs)
        if show < 0:
            fail(f"--show takes a number of episodes to print, at least 0; got {show}.")
        if submit:
            check_submittable(env_id, db)
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
    for episode in result.episodes[:show]:
        print_transcript(episode)
    print_result(result)
    if out:
        path = write_atomic(out, json.dumps(result.to_dict(), indent=2) + "\n")
        console().print(f"wrote {path}", markup=False)
    if submit:
        submit_result(result.to_dict(), db)


def check_submittable(env_id: str, db: str | None) -> None:
    """Before an evaluation is spent: refuse an env whose results cannot be ranked, or a leaderboard file
    that cannot be opened (what would otherwise refuse the result once it is made)."""
    from argym.leaderboards import Store
    from argym.leaderboards.submission import check_env_id

    check_env_id(env_id)
    with Store(db):
        pass


def submit_result(result: dict[str, Any], db: str | None, strict: bool = True) -> None:
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
            fail(str(e))
        console(stderr=True).print(
            f"warning: not submitted to the leaderboard: {e}", style="yellow", markup=False
        )
        return
    verb = "submitted as" if rec["created"] else "already on the board as"
    out = console()
    # soft_wrap: a long label or path runs on rather than breaking the command someone will copy
    out.print(f"{verb} #{rec['id']} on board {rec['board']}: {rec['label']}", markup=False, soft_wrap=True)
    out.print(f"  in {where}", markup=False, soft_wrap=True)
    out.print(
        f"  see it with: argym board {result['env_id']} --key {rec['board']}", markup=False, soft_wrap=True
    )


def print_result(result: Any) -> None:
    from rich.table import Table

    kw = " ".join(f"{k}={v}" for k, v in result.env_kwargs.items())
    console().print(
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
    console().print(table)
    if result.infra_failures:
        console(stderr=True).print(
            f"warning: {result.infra_failures} episode(s) were infrastructure failures and are not scored.",
            style="yellow",
            markup=False,
        )
