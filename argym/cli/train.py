"""`argym train` and `argym quickstart`."""

from __future__ import annotations

from pathlib import Path

import click

from argym.callables import import_modules
from argym.cli.app import cli
from argym.cli.common import (
    check_overrides,
    db_option,
    fail,
    import_option,
    print_summary,
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
    from argym.algorithms.trainer import train as run_training

    with user_errors():
        import_modules(imports)
        cfg = load_config(config_path, pairs)
        summary = run_training(cfg)
    print_summary("training summary", summary or {})


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
    """Train the tiny model on arithmetic on the CPU and show it learn (a few minutes).

    OVERRIDES are key=value changes to the quickstart recipe.
    """
    with user_errors():
        pairs = check_overrides(overrides)
    from argym.algorithms.quickstart import run_quickstart

    with user_errors():
        # prints its own before/after table and writes summary.json
        run_quickstart(
            out_dir, pairs, submit=(lambda r: submit_result(r, db, strict=False)) if submit else None
        )
