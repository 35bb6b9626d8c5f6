"""transformers' compiled fast path in `HFPolicy` (static KV cache + torch.compile, bucketed shapes)."""

from __future__ import annotations

import logging

import pytest
import torch

from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

PROMPTS = ["What is 2+3?", "Say hi.", "Add 10 and 32, then box the result."]


def _policy(compiled: bool) -> HFPolicy:
    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, TinyModelConfig(num_layers=2), seed=3)
    return HFPolicy(model, tok, name="tiny", compiled=compiled)


def _prompts(policy: HFPolicy) -> list[list[int]]:
    return [policy.renderer.prompt_ids([{"role": "user", "content": p}]) for p in PROMPTS]


@pytest.mark.slow
def test_compiled_greedy_matches_eager_and_keeps_compiling():
    torch.set_num_threads(1)
    eager, fast = _policy(False), _policy(True)
    sampling = SamplingParams(temperature=0, max_new_tokens=12)
    want = eager.generate(_prompts(eager), sampling)
    got = fast.generate(_prompts(fast), sampling)  # 3 prompts run as a bucket of 4, width padded to 64
    assert fast.compiled, "the compiled path fell back to eager"
    assert len(got) == len(PROMPTS)
    for a, b in zip(want, got):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) < 1e-4


def test_failed_compile_falls_back_to_eager_with_a_log_line(caplog, monkeypatch):
    eager, fast = _policy(False), _policy(True)

    def broken_config():
        from transformers import CompileConfig

        config = CompileConfig(backend="argym_no_such_backend")
        config._compile_all_devices = True
        return config

    monkeypatch.setattr(fast, "_compile_config", broken_config)
    sampling = SamplingParams(temperature=0, max_new_tokens=6)
    with caplog.at_level(logging.WARNING, logger="argym.agents.hf"):
        got = fast.generate(_prompts(fast), sampling)
    assert not fast.compiled
    assert any("generating eagerly" in r.getMessage() for r in caplog.records)
    assert [c.token_ids for c in got] == [c.token_ids for c in eager.generate(_prompts(eager), sampling)]
