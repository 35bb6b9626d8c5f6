"""Weights & Biases beside TensorBoard: off unless asked (``log.wandb=true``; ``pip install 'argym[wandb]'``).

The run's metrics go to W&B as they go to TensorBoard (every finite scalar of each step, at that step), and
its whole config is the W&B run's config. W&B's own settings apply as its users know them: ``WANDB_MODE=offline``
writes the run under the run directory's ``wandb/`` with no network (``wandb sync`` uploads it later),
``WANDB_API_KEY``, ``WANDB_ENTITY``. A resumed argym run continues its W&B run: the id is kept in the run
directory (``wandb_id``).
"""

from __future__ import annotations

import math
import secrets
from pathlib import Path
from typing import Any

from argym.errors import MissingDependencyError


class WandbLog:
    """One W&B run, mirroring `MetricsLog`'s scalars."""

    def __init__(self, run_dir: Path, config: dict[str, Any], project: str, name: str | None = None):
        try:
            import wandb
        except ImportError:
            raise MissingDependencyError(
                "wandb", "wandb", "log.wandb=true (Weights & Biases logging)"
            ) from None
        id_file = run_dir / "wandb_id"
        run_id = (
            id_file.read_text().strip() if id_file.is_file() else secrets.token_hex(4)
        )  # W&B ids: [a-z0-9]
        id_file.write_text(run_id + "\n")
        self.run = wandb.init(
            project=project,
            name=name or run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
            settings=wandb.Settings(console="off"),
        )

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()
