"""The Python API the README documents (issue 44, item 9): `Trainer(cfg).fit()` returns the run's summary."""

from __future__ import annotations

import json

from argym.algorithms.checkpoint import read_best
from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer

from ..tiny_run import TINY_RUN


def test_fit_returns_the_runs_summary(tmp_path):
    run = tmp_path / "run"
    overrides = [
        "steps=2",
        "eval.every=1",
        "eval.episodes=2",
        "rollout.tasks_per_step=2",
        "rollout.group_size=2",
    ]
    cfg = load_config(None, [*TINY_RUN, *overrides, "rollout.max_new_tokens=8", f"out_dir={run}"])
    trainer = Trainer(cfg)
    try:
        summary = trainer.fit()
    finally:
        trainer.close()
    assert summary["steps"] == 2 and summary["run_dir"] == str(run)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert summary["last"]["train/reward"] == logged[-1]["train/reward"]  # the last step's metrics
    assert summary["best"] == read_best(run) and summary["best"]["step"] == 1  # the held-out eval at step 1
    assert not (run / "wandb").exists() and not (run / "wandb_id").exists()  # W&B is off unless asked
