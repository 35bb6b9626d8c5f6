"""Generation speed on the CPU: transformers eager vs transformers compiled vs vLLM's CPU build, one run.

Each backend generates one batch through argym's own policy classes (`HFPolicy`,
`HFPolicy(compiled=True)`, `VLLMPolicy`) from the same prompts and weights, at
temperature 1, and the tokens it produced are divided by the wall time of the
batch. The compiled path and vLLM are warmed up first (compilation, engine
start), and their one-off costs are reported beside the rate. Models: the tiny
char-level policy (built in code) and SmolLM2-135M-Instruct (`argym models
prepare smollm2`). Results go to stdout and `--out` (JSON).

    python benchmarks/generation.py                       # both models, batch 64 x 128 new tokens
    python benchmarks/generation.py --models tiny --batch 8 --new-tokens 16   # a quick check

The machine's cores are shared by every backend in turn (torch threads = all cores;
vLLM told to reserve none for its front end).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

PROMPTS = [
    "Write a long story about a lighthouse keeper.",
    "Explain how a steam engine works, step by step.",
    "List twenty fruits and describe each one.",
    "What is 17 + 25? Think out loud before answering.",
]


def _tiny_checkpoint(out: Path) -> Path:
    from argym.agents.hf import HFPolicy
    from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    path = out / "tiny"
    HFPolicy(build_tiny_model(tok, seed=0), tok).save(path)
    return path


def _rate(policy, prompts: list[list[int]], sampling, seed: int) -> tuple[float, int, float]:
    """(tokens/s, tokens, seconds) of one batch."""
    t0 = time.perf_counter()
    outs = policy.generate(prompts, sampling, seed=seed)
    seconds = time.perf_counter() - t0
    tokens = sum(len(c.token_ids) for c in outs)
    return tokens / seconds, tokens, seconds


def bench_model(name: str, path: Path, batch: int, new_tokens: int, backends: list[str]) -> dict:
    from argym.agents.hf import HFPolicy
    from argym.agents.policy import SamplingParams

    sampling = SamplingParams(temperature=1.0, max_new_tokens=new_tokens)
    hf = HFPolicy.load(path)
    prompts = [
        hf.renderer.prompt_ids([{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]) for i in range(batch)
    ]
    rows: dict[str, dict] = {}
    if "eager" in backends:
        rate, tokens, seconds = _rate(hf, prompts, sampling, seed=1)
        rows["eager"] = {"tokens_per_s": rate, "tokens": tokens, "seconds": seconds, "dtype": "float32"}
        print(f"{name} eager: {rate:.0f} tok/s ({tokens} tokens in {seconds:.1f} s)", flush=True)
    if "compiled" in backends:
        hf.compiled = True
        t0 = time.perf_counter()
        hf.generate(prompts, sampling, seed=0)  # compiles the graphs for this batch shape
        warm = time.perf_counter() - t0
        rate, tokens, seconds = _rate(hf, prompts, sampling, seed=1)
        rows["compiled"] = {
            "tokens_per_s": rate,
            "tokens": tokens,
            "seconds": seconds,
            "dtype": "float32",
            "first_call_s": warm,
            "fell_back_to_eager": not hf.compiled,
        }
        print(
            f"{name} compiled: {rate:.0f} tok/s ({tokens} tokens in {seconds:.1f} s; first call {warm:.0f} s)",
            flush=True,
        )
    del hf
    if "vllm" in backends:
        from argym.agents.configs import VLLMConfig
        from argym.agents.vllm import VLLMPolicy

        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")  # the same cores as the transformers runs
        t0 = time.perf_counter()
        policy = VLLMPolicy(path, VLLMConfig(kv_cache_gb=2))
        policy.generate(prompts, sampling, seed=0)  # warm-up
        start = time.perf_counter() - t0
        rate, tokens, seconds = _rate(policy, prompts, sampling, seed=1)
        dtype = str(policy.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        rows["vllm"] = {
            "tokens_per_s": rate,
            "tokens": tokens,
            "seconds": seconds,
            "dtype": dtype,
            "start_and_warmup_s": start,
        }
        print(
            f"{name} vllm ({dtype}): {rate:.0f} tok/s ({tokens} tokens in {seconds:.1f} s; start {start:.0f} s)",
            flush=True,
        )
        policy.close()
    base = rows.get("eager", {}).get("tokens_per_s")
    for row in rows.values():
        row["vs_eager"] = row["tokens_per_s"] / base if base else None
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2"], choices=["tiny", "smollm2"])
    parser.add_argument(
        "--backends", nargs="+", default=["eager", "compiled", "vllm"], choices=["eager", "compiled", "vllm"]
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument(
        "--work", default="/tmp/argym-bench-generation", help="where the tiny checkpoint is saved"
    )
    parser.add_argument("--out", default=None, help="write the results as JSON")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = {
        "batch": args.batch,
        "new_tokens": args.new_tokens,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "models": {},
    }
    for name in args.models:
        if name == "tiny":
            path = _tiny_checkpoint(work)
        else:
            from argym.agents.models import prepare

            path = prepare("smollm2")
        results["models"][name] = bench_model(name, path, args.batch, args.new_tokens, args.backends)
    print(json.dumps(results, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
