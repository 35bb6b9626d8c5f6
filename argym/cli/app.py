"""The `argym` command group; each module of this package adds its commands to it."""

from __future__ import annotations

import click

USAGE_ERROR = 2


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `argym` console script."""
    cli.main(args=argv, prog_name="argym")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="argym", prog_name="argym")
def cli() -> None:
    """argym: a gym for training LLM agents with reinforcement learning."""
