"""`argym swe synth`: SWE-v0 instances from a real project's sdist."""

from __future__ import annotations

from pathlib import Path

import click

from argym.cli.app import cli
from argym.cli.common import user_errors
from argym.errors import ConfigError


@cli.group()
def swe() -> None:
    """argym/SWE-v0's tasks: synthesise SWE-bench-format instances from real projects."""


@swe.command(name="synth")
@click.argument("project")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSONL file to write (default: <sdist name>.jsonl in the current directory).",
)
@click.option(
    "--max", "max_instances", type=int, default=25, show_default=True, help="Most instances to keep."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Order in which functions are mutated.")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where a downloaded sdist is kept (instances name its absolute path).",
)
def swe_synth(project: str, out: str | None, max_instances: int, seed: int, directory: str) -> None:
    """Mutate PROJECT's functions and keep the mutations its own tests catch, as SWE-v0 instances.

    PROJECT is an sdist archive (.tar.gz) or a PyPI requirement (toolz==1.2.0), downloaded with
    `pip download --no-binary :all:`. Use the file with `argym eval argym/SWE-v0 tasks=FILE split=all`.
    """
    from argym.envs.swe.instances import write_instances
    from argym.envs.swe.synth import download_sdist, synthesize

    with user_errors():
        path = Path(project)
        if not path.is_file():
            path = download_sdist(project, Path(directory))
        path = path.resolve()
        try:
            instances = synthesize(path, max_instances=max_instances, seed=seed, log=click.echo)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        target = Path(out or path.name.removesuffix(".tar.gz") + ".jsonl")
        write_instances(target, instances)
    click.echo(f"{len(instances)} instance(s) written to {target}")
