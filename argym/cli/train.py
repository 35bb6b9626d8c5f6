"""`argym train` and `argym quickstart`."""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from argym.callables import import_modules
from argym.cli.app import cli
from argym.cli.common import (
    check_overrides,
    db_option,
    fail,
    import_option,
    user_errors,
)
from argym.cli.evaluate import submit_result


@cli.command()
@click.option(
    "-c",
    "--config",
    "recipe",
    default=None,
    help="The recipe: a YAML file or a shipped recipe's name (`argym recipes`). It may also come first "
    "among ARGS; without one the embedded defaults are used.",
)
@import_option
@click.argument("args", nargs=-1)
def train(recipe: str | None, imports: tuple[str, ...], args: tuple[str, ...]) -> None:
    """Train with a recipe, changed by key=value overrides.

    ARGS: [RECIPE] [KEY=VALUE ...]. An argument holding "=" is always an override, so the recipe is
    either the first argument without one, or --config (a path that holds "=" needs --config).

    Example: argym train grpo_math algorithm.lr=1e-4 steps=50   (or: argym train my_recipe.yaml ...)
    """
    from argym.recipes import find_recipe, recipe_names

    overrides = list(args)
    if recipe is None and overrides and "=" not in overrides[0]:
        recipe = overrides.pop(0)
    with user_errors():
        pairs = check_overrides(overrides)
    config_path: str | None = None
    if recipe is not None:
        shipped = None if Path(recipe).is_file() else find_recipe(recipe)
        config_path = str(shipped) if shipped is not None else recipe
        if not Path(config_path).is_file():
            fail(
                f"config file {recipe!r} does not exist, and no shipped recipe has that name. "
                f"Shipped recipes: {', '.join(recipe_names())}."
            )
    from argym.algorithms.config import load_config
    from argym.algorithms.training_run import train as run_training

    with user_errors():
        import_modules(imports)
        cfg = load_config(config_path, pairs)
    with user_errors(), resume_hint(cfg.out_dir):
        summary = run_training(cfg)
    print_training_summary(summary or {})


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
@db_option
@click.argument("overrides", nargs=-1)
def quickstart(out_dir: str, overrides: tuple[str, ...], submit: bool, db: str | None) -> None:
    """Train the tiny model on arithmetic on the CPU and show it learn.

    How long it takes depends on the CPU and on what else runs on it. Measured on 2 CPU cores: 4 min 06 s
    on a quiet machine, 10 min with another job running (its warm start 6.5 min of it; README). It shows
    its progress throughout; stopped (Ctrl-C), the same command resumes from its last checkpoint.

    OVERRIDES are key=value changes to the quickstart recipe.
    """
    with user_errors():
        pairs = check_overrides(overrides)
    from argym.algorithms.quickstart import run_quickstart

    with user_errors(), resume_hint(out_dir):
        # prints its own before/after table and writes summary.json
        run_quickstart(
            out_dir, pairs, submit=(lambda r: submit_result(r, db, strict=False)) if submit else None
        )


@contextlib.contextmanager
def resume_hint(run_dir: str | Path) -> Iterator[None]:
    """A run stopped by Ctrl-C or SIGTERM says where its last checkpoint is and the command that resumes it
    (the one that was run: a run directory resumes from its checkpoint), instead of click's bare
    "Aborted!" or nothing; the exit status stays 130 or 143."""
    try:
        yield
    except KeyboardInterrupt:
        print_resume_hint(run_dir, "interrupted")
        sys.exit(128 + signal.SIGINT)
    except SystemExit as e:
        if e.code == 128 + signal.SIGTERM:
            print_resume_hint(run_dir, "stopped by SIGTERM")
        raise


def print_resume_hint(run_dir: str | Path, why: str) -> None:
    from argym.algorithms.checkpoint import WARM_STATE, find_checkpoint, find_warm_start, load_state

    run = Path(run_dir)
    ckpt, warm = find_checkpoint(run), find_warm_start(run)
    if ckpt is not None:
        step = load_state(ckpt).get("step", 0)
        where = f"the last checkpoint is {ckpt} (step {step})"
    elif warm is not None:
        step = load_state(warm, WARM_STATE).get("step", 0)
        where = f"the last checkpoint is {warm} (warm start step {step})"
    else:
        where = "no checkpoint was written yet, so it starts over"
    command = shlex.join(["argym", *sys.argv[1:]])
    click.echo(f"argym: {why}; {where}. Resume with: {command}", err=True)


def print_training_summary(summary: dict[str, Any]) -> None:
    """The held-out figures as people read them (percentages with their 95% intervals); summary.json keeps
    the exact numbers."""
    from rich.table import Table

    from argym.algorithms.training_run import percent
    from argym.cli.common import console

    table = Table(title="training summary", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    if "run_dir" in summary:
        table.add_row("run directory", str(summary["run_dir"]))
    table.add_row("steps", str(summary.get("steps", "")))
    if "before" in summary:
        table.add_row(f"before (step {summary['before']['step']})", percent(summary["before"]))
    if "final" in summary:
        table.add_row(f"final (step {summary.get('steps')})", percent(summary["final"]))
    if "best" in summary:
        best = summary["best"]
        where = str(Path(summary.get("run_dir", ".")) / "best")
        table.add_row("best", f"{best['success']:.1%} at step {best['step']}, kept in {where}")
    console().print(table)
