"""The `argym` command group; each module of this package adds its commands to it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import warnings
from typing import Any, TextIO

import click

USAGE_ERROR = 2
INTERNAL_ERROR = 1

DEBUG_ENV = "ARGYM_DEBUG"
"""Set (to 1) by ``argym --debug``, or by the user: errors show their Python traceback."""


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def unwind_on_sigterm() -> None:
    """SIGTERM (a job scheduler's stop, `timeout`, `docker stop`, `kill`) exits like a normal error exit.

    Python's default is to die at once, so no `finally` runs: the trainer's envs, their sandboxes'
    folders (and, seen once, a warm worker living on under its leased uid until that uid was leased
    again), a local Ray and a vLLM engine were left to the next run's sweeps. Raising `SystemExit` unwinds the
    stack, so each `close` runs; the exit status stays the conventional 128 + 15. A handler the
    embedding program set is kept.
    """
    if threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def one_line_warnings() -> None:
    """A warning is one line on stderr (``argym: warning: ...``), not Python's default of the file, line
    number and the source line that called `warnings.warn`, which a user cannot act on (``--debug``: the
    default, for a developer)."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        kind = "warning" if category is UserWarning else f"warning ({category.__name__})"
        out: Any = file or sys.stderr
        try:
            out.write(f"argym: {kind}: {' '.join(str(message).split())}\n")
        except OSError:  # stderr closed: nowhere to warn
            pass

    if not debugging():
        warnings.showwarning = show


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `argym` console script.

    A user's mistake is one line (`common.user_errors`); anything else that escapes a command is
    a bug, reported in one line that says how to see its traceback (``--debug``).
    """
    unwind_on_sigterm()
    one_line_warnings()
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
    user_modules_importable()


def user_modules_importable() -> None:
    """Every command imports a user's modules (``--import M``, ``M:ID`` env ids, ``M:function`` rewards and
    programs) by one rule: from the Python path and the current directory, as ``python -m`` would."""
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
