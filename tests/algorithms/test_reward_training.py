"""`argym train` uses every reward component by name, logs each under its name, and learns with them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer
from argym.errors import ConfigError

from ..tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]
SMALL = [
    *TINY_RUN,
    "rollout.tasks_per_step=3",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "eval.episodes=5",
    "eval.every=0",
]


def test_every_component_by_name_is_logged_and_shapes_the_reward(tmp_path):
    cfg = load_config(
        REPO / "configs" / "grpo_math_prm.yaml",
        SMALL
        + [
            "reward.weights.sar=0.2",
            "reward.weights.overlong=0.0",
            "reward.weights.format=0.1",
            "steps=1",
            f"out_dir={tmp_path}",
        ],
    )
    assert cfg.reward.weights == {"outcome": 1.0, "process": 0.5, "format": 0.1, "sar": 0.2, "overlong": 0.0}
    trainer = Trainer(cfg)
    try:
        trajs, metrics = trainer.collect()
        for name in ("outcome", "format", "overlong", "process", "sar", "total"):
            assert f"reward/{name}" in metrics, name
        assert -1.0 <= metrics["reward/sar"] <= 1.0
        # the rule PRM scores each attempt: a failed episode of 3 attempts has min-form process reward ≈ -1
        failed = [t for t in trajs if not t.success and t.turns == 3]
        assert all(t.reward < -0.4 for t in failed)
        trainer.fit()
    finally:
        trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and all("reward/process" in r and "train/loss" in r for r in rows)


def test_overlong_twice_is_refused(tmp_path):
    cfg = load_config(
        None, SMALL + ["sampling.overlong=true", "reward.weights.overlong=1.0", f"out_dir={tmp_path}"]
    )
    with pytest.raises(ConfigError, match="overlong"):
        Trainer(cfg)
