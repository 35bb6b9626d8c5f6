"""What every command shares: one-line user errors, key=value parsing, rich output."""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from argym.cli.app import USAGE_ERROR, debugging
from argym.errors import ArgymError
from argym.values import parse_pair

if TYPE_CHECKING:
    from rich.console import Console


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn errors a user can cause into one line on stderr and exit status 2 (``--debug``: the traceback too)."""
    import yaml

    try:
        yield
    except (ArgymError, FileNotFoundError, IsADirectoryError, NotADirectoryError) as e:
        show_traceback()
        fail(str(e) if not isinstance(e, OSError) or not e.filename else f"{e.strerror}: {e.filename}")
    except yaml.YAMLError as e:
        show_traceback()
        fail(f"cannot read YAML: {e}")


def show_traceback() -> None:
    """Print the traceback of the error being handled, under ``argym --debug`` only."""
    if debugging():
        traceback.print_exc()


def fail(message: str) -> None:
    click.echo("argym: error: " + " ".join(message.split()), err=True)
    sys.exit(USAGE_ERROR)


def parse_kwargs(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Parse ``key=value`` strings into kwargs (values read by `argym.values.parse_value`)."""
    return dict(parse_pair(pair) for pair in pairs)


def check_overrides(pairs: tuple[str, ...] | list[str]) -> list[str]:
    """The ``dotted.key=value`` config overrides, each checked to have that shape."""
    for pair in pairs:
        parse_pair(pair, example="algorithm.lr=1e-5", dotted=True)
    return list(pairs)


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def print_summary(title: str, summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for k, v in flatten(summary).items():
        table.add_row(k, rounded(v))
    console().print(table)


def rounded(value: Any) -> str:
    """A summary value for people: floats to 4 significant digits, also inside lists."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(rounded(v) for v in value) + "]"
    return str(value)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


# ---- commands ----------------------------------------------------------------------


db_option = click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="Leaderboard file (default: $ARGYM_LEADERBOARD, else $ARGYM_HOME/leaderboard.sqlite, "
    "else ~/.local/share/argym/leaderboard.sqlite).",
)


import_option = click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE first, so the envs, strategies, rewards or agent specs it registers can be named "
    "(repeatable).",
)
