"""LoRA adapters synced alone to vLLM (`VLLMPolicy(lora_rank=…)`): vLLM's CPU build running the tiny model in
float32 with LoRA enabled. The adapter-only sync gives the sampler log-probs the merged sync gives, within
1e-4 per token (float32: W·x + s·B(A·x) against (W + s·BA)·x), and sends a fraction of the bytes."""

from __future__ import annotations

import os

import pytest
import torch

from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

TINY = TinyModelConfig(num_layers=2)  # head dim 32: a size vLLM's CPU attention kernels take
QUESTIONS = ["What is 2+3?", "Say hi.", "Add 10 and 32, then box the result."]
BOUND = 1e-4
"""the largest per-token log-prob gap allowed between adapter-only and merged sync (float32)"""


def _adapted(seed: int):
    """A peft model over the tiny policy whose adapters change its outputs (B is zero at init)."""
    from peft import LoraConfig, get_peft_model

    tok = build_tiny_tokenizer()
    model = get_peft_model(
        build_tiny_model(tok, TINY, seed=2),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model, tok


@pytest.mark.slow
def test_adapter_only_sync_gives_the_merged_syncs_log_probs(tmp_path):
    from argym.agents.configs import VLLMConfig
    from argym.agents.vllm import VLLMPolicy

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    torch.set_num_threads(1)
    model, tok = _adapted(seed=0)
    # the base weights, as a LoRA run's engine starts (the adapters' B is zero at the start)
    HFPolicy(build_tiny_model(tok, TINY, seed=2), tok, name="tiny").save(tmp_path / "start")
    config = VLLMConfig(dtype="float32", enforce_eager=True, max_model_len=512, kv_cache_gb=0.5)
    policy = VLLMPolicy(tmp_path / "start", config, lora_rank=4)
    try:
        prompts = [policy.renderer.prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]
        sampling = SamplingParams(temperature=1.0, max_new_tokens=12)
        runs = {}
        for step, seed in enumerate((0, 1)):  # two versions of the adapter, as two training steps make
            if step:
                model, _ = _adapted(seed=seed)  # same base, other adapters
            sizes = {}
            for mode in ("merged", "adapter"):
                policy.adapter_sync = mode == "adapter"
                policy.load_weights(model)
                sizes[mode] = policy.sync_bytes
                runs[step, mode] = policy.generate(prompts, sampling, seed=11)
            a, m = runs[step, "adapter"], runs[step, "merged"]
            assert [c.token_ids for c in a] == [c.token_ids for c in m], step
            gap = max(abs(x - y) for ca, cm in zip(a, m) for x, y in zip(ca.logprobs, cm.logprobs))
            assert gap < BOUND, (step, gap)
            # the adapter alone (after the base, synced again after a merged load) is a fraction of the model
            assert policy.sync_bytes == sizes["adapter"]
        policy.load_weights(model)  # a second adapter sync in a row sends the adapter alone
        assert policy.sync_bytes < sizes["merged"] / 10, (policy.sync_bytes, sizes["merged"])
        assert [c.token_ids for c in runs[0, "adapter"]] != [c.token_ids for c in runs[1, "adapter"]], (
            "the adapters changed nothing: the test would pass with them ignored"
        )
    finally:
        policy.close()


def test_lora_sync_is_merged_or_adapter():
    from argym.agents.configs import VLLMConfig
    from argym.algorithms.config import load_config
    from argym.errors import ConfigError

    assert load_config(None, ["rollout.vllm.lora_sync=adapter"]).rollout.vllm.lora_sync == "adapter"
    with pytest.raises(ConfigError, match="lora_sync"):
        VLLMConfig(lora_sync="delta")
