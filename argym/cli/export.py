"""`argym export RUN_DIR OUT_DIR`: a trained policy as a directory to upload to the Hugging Face Hub."""

from __future__ import annotations

import click

from argym.cli.app import cli
from argym.cli.common import console, user_errors


@cli.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option(
    "--checkpoint",
    type=click.Choice(["best", "last"]),
    default="best",
    show_default=True,
    help="The run's best checkpoint by the held-out metric, or the last one written.",
)
@click.option("--force", is_flag=True, help="Write into OUT_DIR even if it is not empty.")
def export(run_dir: str, out_dir: str, checkpoint: str, force: bool) -> None:
    """Write RUN_DIR's policy to OUT_DIR as the Hugging Face Hub expects it: config.json, weights, tokenizer,
    and a model card (README.md) with how it was trained and scored. Nothing is uploaded; then run
    `hf upload ORG/NAME OUT_DIR`."""
    from argym.algorithms.export import export_checkpoint

    with user_errors():
        out = export_checkpoint(run_dir, out_dir, checkpoint=checkpoint, force=force)
    names = ", ".join(sorted(p.name for p in out.iterdir()))
    console().print(
        f"exported {checkpoint} checkpoint of {run_dir} to {out}: {names}", markup=False, soft_wrap=True
    )
    console().print(f"  upload it with: hf upload ORG/NAME {out}", markup=False, soft_wrap=True)
