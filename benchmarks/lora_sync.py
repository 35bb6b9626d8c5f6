"""Bytes and seconds per weight sync of a LoRA run into vLLM: the merged weights vs the adapter alone.

SmolLM2-135M-Instruct with LoRA adapters (peft, rank `--rank` on every linear projection, as
`policy.lora_target_modules: null` gives), one vLLM CPU engine started with LoRA enabled
(`VLLMPolicy(lora_rank=…)`). Each sync loads the learner's current weights (its adapters moved a little
between syncs, as training moves them): `--syncs` merged syncs, then as many adapter-only syncs (the first
also loads the base weights once; the figures are over the rest). Also one generate call of 8 prompts ×
32 tokens after each kind, since an adapter costs LoRA kernels in every generate call.

    .venv/bin/python benchmarks/lora_sync.py --rank 16 --syncs 4

Needs vLLM's CPU build (`make vllm`) and the SmolLM2 checkpoint (`argym models prepare smollm2`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch


def main() -> None:
    from argym.agents.configs import VLLMConfig
    from argym.agents.hf import HFPolicy
    from argym.agents.models import resolve_checkpoint
    from argym.agents.policy import SamplingParams
    from argym.agents.vllm import VLLMPolicy
    from argym.algorithms.lora import apply_lora

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--syncs", type=int, default=4)
    a = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    torch.set_num_threads(1)
    path = resolve_checkpoint("smollm2")
    hf = HFPolicy.load(path, dtype="float32")
    model = apply_lora(hf.model, a.rank, 2 * a.rank, 0.0, None)
    config = VLLMConfig(dtype="auto", enforce_eager=True, max_model_len=512, kv_cache_gb=0.5)
    engine = VLLMPolicy(path, config, lora_rank=a.rank)
    prompts = [
        engine.renderer.prompt_ids([{"role": "user", "content": f"What is {i}+{2 * i}?"}]) for i in range(8)
    ]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=32)

    def moved() -> None:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_" in name:
                    p.add_(torch.randn_like(p) * 1e-3)

    try:
        for mode in ("merged", "adapter"):
            engine.adapter_sync = mode == "adapter"
            seconds, sizes = [], []
            for _ in range(a.syncs + (mode == "adapter")):
                moved()
                seconds.append(engine.load_weights(model))
                sizes.append(engine.sync_bytes)
            if mode == "adapter":  # the first adapter sync loads the base as well
                print(f"adapter, first sync (base + adapter): {sizes[0] / 2**20:.1f} MiB, {seconds[0]:.2f} s")
                seconds, sizes = seconds[1:], sizes[1:]
            t0 = time.perf_counter()
            engine.generate(prompts, sampling, seed=0)
            gen_s = time.perf_counter() - t0
            print(
                f"{mode}: {statistics.mean(sizes) / 2**20:.2f} MiB per sync, "
                f"{statistics.median(seconds):.3f} s per sync (median of {len(seconds)}), "
                f"generate 8x32 tokens {gen_s:.2f} s",
                flush=True,
            )
    finally:
        engine.close()


if __name__ == "__main__":
    main()
