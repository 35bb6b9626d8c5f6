"""argym/SWE-v0 is trainable: the recipe loads; oracle trajectories (real edits in the sandbox, then grading)
keep tool outputs out of the loss; two GRPO steps of the tiny policy run on two instances through the real
workspace and grader, with the env's messages masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from argym.agents.renderer import ChatRenderer
from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.config import load_config
from argym.algorithms.sft import oracle_sequences

REPO = Path(__file__).resolve().parents[3]
TINY = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.num_heads=2",
    "warm_start.steps=2",
    "warm_start.tasks=2",
    "warm_start.batch_size=2",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=32",
    "eval.episodes=2",
    "eval.every=0",
    "algorithm.micro_batch_size=4",
    "steps=2",
    "checkpoint_every=2",
    "env.kwargs.max_turns=2",
]


def test_oracle_trajectories_mask_tool_outputs(need) -> None:
    need("process")
    tok = build_tiny_tokenizer()
    cfg = load_config(REPO / "configs" / "grpo_swe.yaml")
    assert cfg.env.id == "argym/SWE-v0" and cfg.env.kwargs["split"] == "train"
    seqs = oracle_sequences(cfg.env.id, cfg.env.kwargs, ChatRenderer(tok), n_tasks=2, seed=0)
    assert len(seqs) == 2
    for ids, mask in seqs:
        policy = tok.decode([i for i, m in zip(ids, mask) if m])
        env_text = tok.decode([i for i, m in zip(ids, mask) if not m])
        assert '"name": "str_replace"' in policy and '"name": "submit"' in policy
        assert "Edited " in env_text and "Edited " not in policy  # the tool's real output, masked


@pytest.mark.slow
def test_two_grpo_steps_on_two_instances(tmp_path, need, fit_two_steps) -> None:
    need("process")
    cfg = load_config(REPO / "configs" / "grpo_swe.yaml", TINY + [f"out_dir={tmp_path}"])
    _, seen, tok = fit_two_steps(cfg, "Fix the issue in the repository")
    for t in seen:
        policy_text = tok.decode([i for i, m in zip(t.token_ids, t.loss_mask) if m])
        full = tok.decode(t.token_ids)
        # the env answered every turn (a tool's output or what was wrong), and none of it is trained on
        assert "Use the tools" in full or "<|im_start|>tool" in full
        assert "Use the tools" not in policy_text and "<|im_start|>tool" not in policy_text
