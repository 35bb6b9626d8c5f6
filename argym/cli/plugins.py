"""`argym plugins`: every plug-in point and what is registered in it (argym's parts and a user's)."""

from __future__ import annotations

import json

import click

from argym.callables import import_modules
from argym.cli.app import cli
from argym.cli.common import console, import_option, user_errors


@cli.command()
@import_option
@click.option("--json", "as_json", is_flag=True, help="Print the catalog as JSON.")
def plugins(imports: tuple[str, ...], as_json: bool) -> None:
    """List the registries (envs, strategies, rewards, estimators, ...) and the names in each.

    A recipe names parts from these lists; `--import my_pkg.parts` shows what your module adds.
    """
    import argym.check.corpus  # noqa: F401  (argym check's exploit families and exploits, listed too)
    from argym.registry import catalog

    with user_errors():
        import_modules(imports)
        found = catalog()
    if as_json:
        click.echo(json.dumps(found, indent=1))
        return
    from rich.table import Table

    table = Table(title="argym plug-in points (docs/design.md, Plug-in points)")
    table.add_column("kind", style="bold", no_wrap=True)
    table.add_column("registered")
    for kind, names in found.items():
        table.add_row(kind, ", ".join(names) or "(none)")
    console().print(table, markup=False)
