"""Does vLLM's bf16 engine sample from the learner's weights after `load_weights`? SmolLM2 (tied embeddings).

The gap is |log π_learner(token) − vLLM's reported log-prob| per sampled token (temperature 1,
3 prompts × 24 tokens), with the learner in float32 (transformers). Four checks, one engine:

1. the initial weights (the gap is bf16 compute alone);
2. noise of std 0.02 on the tied embedding only, loaded: the gap to the moved weights must stay
   near (1), the gap to the old ones must grow (the output head moved with the embedding);
3. `--repeat N` loads of successively perturbed weights (noise 5e-4 each, as training moves them);
4. `--trained FILE`: a trained checkpoint's weights (safetensors, HF names) loaded the same way.

    .venv/bin/python benchmarks/vllm_sync.py --repeat 12 \\
        --trained runs/smollm2_learning/argym_ckpt/step00022.safetensors

Needs vLLM's CPU build (`make vllm`) and the SmolLM2 checkpoint (`argym models prepare smollm2`).
"""

from __future__ import annotations

import argparse
import copy
import os

import torch

QUESTIONS = ["What is 12+35?", "Say hi.", "Add 10 and 32, then box the result."]


def main() -> None:
    from safetensors.torch import load_file

    from argym.agents.hf import HFPolicy
    from argym.agents.models import resolve_checkpoint
    from argym.agents.policy import SamplingParams
    from argym.agents.spec import load_agent

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=12)
    ap.add_argument("--trained", default=None, help="a safetensors file of trained weights (HF names)")
    a = ap.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    torch.set_num_threads(1)
    path = resolve_checkpoint("smollm2")
    hf = HFPolicy.load(path, dtype="float32")
    engine = load_agent(f"vllm:{path}?dtype=auto&enforce_eager=true&max_model_len=512&kv_cache_gb=0.5")
    prompts = [engine.renderer.prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]
    sampling = SamplingParams(temperature=1.0, max_new_tokens=24)

    def gap(model: torch.nn.Module) -> str:
        gaps = []
        for prompt, c in zip(prompts, engine.generate(prompts, sampling, seed=3)):
            with torch.no_grad():
                logits = model(torch.tensor([prompt + c.token_ids])).logits[0, len(prompt) - 1 : -1].float()
            mine = torch.log_softmax(logits, -1).gather(-1, torch.tensor(c.token_ids)[:, None])[:, 0]
            gaps.append((mine - torch.tensor(c.logprobs)).abs())
        g = torch.cat(gaps)
        return f"mean {g.mean().item():.3f}, max {g.max().item():.3f}"

    try:
        print(f"1. initial weights: gap {gap(hf.model)}", flush=True)
        moved = copy.deepcopy(hf.model)
        with torch.no_grad():
            moved.get_input_embeddings().weight.add_(
                torch.randn_like(moved.get_input_embeddings().weight) * 0.02
            )
        engine.load_weights(moved)
        print(f"2. embedding moved: gap to the moved weights {gap(moved)}; to the old ones {gap(hf.model)}")
        walk = copy.deepcopy(hf.model)
        for _ in range(a.repeat):
            with torch.no_grad():
                for p in walk.parameters():
                    p.add_(torch.randn_like(p) * 5e-4)
            engine.load_weights(walk)
        print(f"3. after {a.repeat} more loads: gap to the last weights {gap(walk)}", flush=True)
        if a.trained:
            trained = copy.deepcopy(hf.model)
            trained.load_state_dict({k: v.float() for k, v in load_file(a.trained).items()}, strict=False)
            trained.tie_weights()
            engine.load_weights(trained)
            print(f"4. trained weights ({a.trained}): gap {gap(trained)}")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
