"""argym/Code-v0 is trainable: the recipe loads, and two GRPO steps of the tiny policy run through
the real sandbox with multi-turn feedback, with loss masks on policy tokens only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from argym.algorithms.config import load_config

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.num_heads=2",
    "warm_start.steps=2",
    "warm_start.tasks=8",
    "warm_start.batch_size=4",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=24",
    "eval.episodes=4",
    "eval.every=0",
    "algorithm.micro_batch_size=4",
    "steps=2",
    "checkpoint_every=2",
    "env.kwargs.tasks=functions(test_size=8)",
]


@pytest.mark.skipif(
    shutil.which("bwrap") is None and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (apt-get install bubblewrap)",
)
def test_two_grpo_steps_on_code_through_the_sandbox(tmp_path, fit_two_steps) -> None:
    cfg = load_config(REPO / "configs" / "grpo_code.yaml", TINY + [f"out_dir={tmp_path}"])
    assert cfg.env.id == "argym/Code-v0" and cfg.env.kwargs["max_attempts"] == 2
    _, seen, tok = fit_two_steps(cfg, "Complete the Python function")
    for t in seen:
        policy_text = tok.decode([i for i, m in zip(t.token_ids, t.loss_mask) if m])
        if t.turns == 2:  # the env's feedback between the attempts is masked out
            assert "Revise your code" not in policy_text
            assert "Revise your code" in tok.decode(t.token_ids)
    assert any(t.turns == 2 for t in seen)  # an untrained policy fails its first attempt
