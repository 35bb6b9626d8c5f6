"""`argym doctor` and `argym check`: is the install usable, does an env keep its contract."""

from __future__ import annotations

import json
import sys

import click

from argym.callables import import_modules
from argym.cli.app import cli
from argym.cli.common import console, parse_kwargs, user_errors
from argym.errors import ConfigError


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
    "--tokens",
    "tokens_model",
    default=None,
    metavar="MODEL",
    help="Also check token exactness with MODEL's tokenizer and chat template (tiny, smollm2, hf:PATH); "
    "with --only tokens, only that.",
)
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
    tokens_model: str | None,
    step_timeout: float,
    reset_timeout: float,
) -> None:
    """Check ENV_ID against the env contract and the exploit corpus; exit 1 if a check fails.

    ENV_KWARGS are the env's key=value arguments. See docs/check.md.
    """
    import os

    from argym.check import CheckConfig, run_checks
    from argym.registration import checked_kwargs

    with user_errors():
        import_modules(imports)
        checked_kwargs(env_id, parse_kwargs(env_kwargs))  # a bad kwarg is one line, not every check failing
        try:
            config = CheckConfig(
                env_id,
                parse_kwargs(env_kwargs),
                tuple(imports),
                step_timeout,
                reset_timeout,
                quick=quick,
                only=tuple(only),
                tokens=tokens_model,
            )
            report = run_checks(
                config,
                tuple(exploit_modules),
                progress=lambda o: click.echo(f"{o.check}: {o.result} ({o.seconds:.1f} s)", err=True),
            )
        except (ValueError, ImportError) as e:
            raise ConfigError(str(e)) from None
    report.print(console())
    if json_path:
        report.write_json(json_path)
    code = 0 if report.passed else 1
    if report.hung:  # an abandoned call's thread would keep the interpreter alive
        sys.stdout.flush()
        os._exit(code)
    sys.exit(code)
