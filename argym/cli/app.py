"""The `argym` command group; each module of this package adds its commands to it."""

from __future__ import annotations

import os
import sys

import click

USAGE_ERROR = 2
INTERNAL_ERROR = 1

DEBUG_ENV = "ARGYM_DEBUG"
"""Set (to 1) by ``argym --debug``, or by the user: errors show their Python traceback."""


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `argym` console script.

    A user's mistake is one line (`common.user_errors`); anything else that escapes a command is
    a bug, reported in one line that says how to see its traceback (``--debug``).
    """
    try:
        cli.main(args=argv, prog_name="argym")
    except Exception as e:
        if debugging():
            raise
        click.echo(
            f"argym: internal error: {type(e).__name__}: {e} (run `argym --debug ...` for the traceback)",
            err=True,
        )
        sys.exit(INTERNAL_ERROR)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="argym", prog_name="argym")
@click.option("--debug", is_flag=True, help="Show the Python traceback of an error (also: ARGYM_DEBUG=1).")
def cli(debug: bool) -> None:
    """argym: a gym for training LLM agents with reinforcement learning."""
    if debug:  # an env var, so subprocesses (workers, `argym check`'s children) see it too
        os.environ[DEBUG_ENV] = "1"
