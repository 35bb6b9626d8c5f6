"""argym/ToolCall-v0 is trainable: the recipe loads, the warm start trains on real oracle trajectories (tool
results masked), and two GRPO steps of the tiny policy run through real tool executions with tool-result
tokens masked out of the loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from argym.agents.renderer import ChatRenderer
from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.config import load_config
from argym.algorithms.sft import oracle_sequences

REPO = Path(__file__).resolve().parents[3]
# order_total tasks: kv_get, calculator and kv_set, no sandbox; a policy this small still needs many warm-start steps
# before it writes a readable call, so the rollouts sample at a low temperature
TINY = [
    "policy.tiny.hidden_size=64",
    "policy.tiny.num_layers=2",
    "policy.tiny.intermediate_size=128",
    "policy.tiny.num_heads=2",
    "warm_start.steps=200",
    "warm_start.tasks=32",
    "warm_start.batch_size=8",
    "warm_start.lr=0.005",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=96",
    "rollout.temperature=0.2",
    "algorithm.temperature=0.2",
    "eval.episodes=2",
    "eval.every=0",
    "algorithm.micro_batch_size=4",
    "steps=2",
    "checkpoint_every=2",
    "env.kwargs.tasks=executable(test_size=4,kinds=order_total)",
    "env.kwargs.max_turns=3",
]


def test_oracle_trajectories_mask_tool_results():
    tok = build_tiny_tokenizer()
    renderer = ChatRenderer(tok)
    cfg = load_config(REPO / "configs" / "grpo_toolcall.yaml")
    seqs = oracle_sequences(cfg.env.id, cfg.env.kwargs, renderer, n_tasks=6, seed=0)
    assert len(seqs) == 6
    for ids, mask in seqs:
        policy = tok.decode([i for i, m in zip(ids, mask) if m])
        env_text = tok.decode([i for i, m in zip(ids, mask) if not m])
        assert "<tool_call>" in policy and "The answer is" in policy
        assert "<|im_start|>tool" in env_text and "<|im_start|>tool" not in policy
        assert env_text.startswith("<|im_start|>system\nTools: ")  # the recipe names the tools, no schemas


@pytest.mark.slow
def test_two_grpo_steps_through_real_tool_executions(tmp_path, fit_two_steps) -> None:
    cfg = load_config(REPO / "configs" / "grpo_toolcall.yaml", TINY + [f"out_dir={tmp_path}"])
    assert cfg.env.id == "argym/ToolCall-v0"
    _, seen, tok = fit_two_steps(cfg, "Tools: kv_get")
    tool_turns = 0
    for t in seen:
        policy_text = tok.decode([i for i, m in zip(t.token_ids, t.loss_mask) if m])
        for m in t.messages:
            if m["role"] == "tool":  # every executed tool result is in the context, and masked
                tool_turns += 1
                assert m["content"] in tok.decode(t.token_ids) and m["content"] not in policy_text
        assert "<|im_start|>tool" not in policy_text
    assert tool_turns > 0, [
        t.messages[2:] for t in seen
    ]  # the warm-started policy called tools that really ran
