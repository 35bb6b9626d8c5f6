"""`argym envs [ID]` and `argym recipes`: what can be named, and what each takes."""

from __future__ import annotations

import click

from argym.callables import import_modules
from argym.cli.app import cli
from argym.cli.common import console, import_option, user_errors


@cli.command()
@click.argument("env_id", required=False)
@import_option
def envs(env_id: str | None, imports: tuple[str, ...]) -> None:
    """List the registered environments (argym's and installed plug-ins'), or ENV_ID's kwargs.

    With ENV_ID: each keyword argument, its type and default (what ``key=value`` after the id may set).
    """
    from rich.table import Table

    from argym.registration import description, registered_ids

    with user_errors():
        import_modules(imports)
        if env_id is not None:
            show_kwargs(env_id)
            return
        ids = registered_ids()
    table = Table(title="argym environments (`argym envs ID` shows one's kwargs)")
    table.add_column("id", style="bold", no_wrap=True)
    table.add_column("description")
    for i in ids:
        table.add_row(i, description(i))
    console().print(table, markup=False)


def show_kwargs(env_id: str) -> None:
    from rich.table import Table

    from argym.envargs import params
    from argym.registration import creator, description, resolve

    found, open_ended = params(creator(env_id))
    table = Table(title=f"{resolve(env_id)}: {description(env_id)}", title_justify="left")
    for column in ("kwarg", "type", "default"):
        table.add_column(column, style="bold" if column == "kwarg" else None)
    for p in found:
        table.add_row(*p.describe())
    console().print(table, markup=False)
    if open_ended:
        console().print("It also passes other kwargs on (see its docstring).", markup=False)


@cli.command()
def recipes() -> None:
    """List the training recipes shipped with argym (`argym train NAME` runs one from any directory)."""
    from rich.table import Table

    from argym.recipes import find_recipe, recipe_names, summary

    table = Table(title="argym recipes (`argym train NAME key=value ...`)")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("description")
    for name in recipe_names():
        path = find_recipe(name)
        table.add_row(name, summary(path) if path else "")
    console().print(table, markup=False)
