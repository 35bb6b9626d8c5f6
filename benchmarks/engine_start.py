"""How long the SmolLM2 recipe's vLLM engine takes to be ready for its first rollout, run after run.

Each start is a fresh process with a fresh copy of the model's checkpoint in a new directory, as each
training run starts its engine from its own checkpoint (`runs/<name>/checkpoint/policy`). The engine is
the recipe's (`configs/grpo_smollm2_math.yaml`: compiled, in process on the CPU, 2 GiB of KV cache);
after the start it samples 64 prompts × 96 tokens three times (the median round is reported), so that a faster start is not paid for in generation.
`--aot off` builds it as argym did before (`VLLM_USE_AOT_COMPILE=0`: Dynamo traces the model at every
start, Inductor's graphs come from its cache) for the side-by-side figure.

    .venv/bin/python benchmarks/engine_start.py [--starts 3] [--aot on|off] [--json out.json]

The first start after a change of vLLM, torch or the model compiles and is slower; the figure that
every later run sees is the median of the others.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS, NEW_TOKENS, ROUNDS = 64, 96, 3


def child(checkpoint: str) -> None:
    from argym.agents.policy import SamplingParams
    from argym.agents.vllm import VLLMPolicy
    from argym.algorithms.config import load_config

    cfg = load_config("configs/grpo_smollm2_math.yaml", [])
    policy = VLLMPolicy(checkpoint, cfg.rollout.vllm)
    prompts = [
        policy.renderer.prompt_ids([{"role": "user", "content": f"What is {i} + {i + 7}?"}])
        for i in range(PROMPTS)
    ]
    times, tokens = [], 0
    for r in range(ROUNDS):  # the median of a few rounds: one is at the mercy of a shared machine's noise
        t0 = time.perf_counter()
        out = policy.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=NEW_TOKENS), seed=r)
        times.append(time.perf_counter() - t0)
        tokens = sum(len(c.token_ids) for c in out)
    generate_s = statistics.median(times)
    policy.close()
    print("RESULT " + json.dumps({"start_s": policy.start_s, "generate_s": generate_s, "tokens": tokens}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument(
        "--aot", choices=("on", "off"), default="on", help="vLLM's AOT compile cache (argym's default: on)"
    )
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child)
        return
    from argym.agents.models import prepare

    source = prepare("smollm2")
    env = {**os.environ, "VLLM_USE_AOT_COMPILE": "1" if a.aot == "on" else "0"}
    runs = []
    for i in range(a.starts):
        with tempfile.TemporaryDirectory(prefix="argym-engine-start-") as tmp:
            checkpoint = Path(tmp) / "checkpoint" / "policy"  # a new run's directory each time
            shutil.copytree(source, checkpoint)
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(checkpoint)],
                env=env,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"start {i} failed:\n{proc.stderr[-3000:]}")
        line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
        runs.append({**json.loads(line[len("RESULT ") :]), "process_s": wall})
        r = runs[-1]
        print(
            f"start {i}: engine ready in {r['start_s']:.1f} s; {r['tokens']} tokens in {r['generate_s']:.1f} s "
            f"({r['tokens'] / r['generate_s']:.0f}/s); process {wall:.1f} s",
            flush=True,
        )
    later = runs[1:] or runs
    summary = {
        "aot": a.aot,
        "runs": runs,
        "median_start_s_after_first": statistics.median(r["start_s"] for r in later),
        "median_tokens_per_s_after_first": statistics.median(r["tokens"] / r["generate_s"] for r in later),
    }
    print(
        f"aot {a.aot}: median start after the first {summary['median_start_s_after_first']:.1f} s, "
        f"{summary['median_tokens_per_s_after_first']:.0f} tokens/s"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
