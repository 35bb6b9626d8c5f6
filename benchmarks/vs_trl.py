"""argym vs TRL's GRPOTrainer: wall time per GRPO step (generation included) and peak memory.

Same tiny char-level Qwen2 (built in code, same init), same task (two-digit
addition prompts, chat template), same batch (32 prompts × 8 samples, 16 new
tokens, temperature 1), same GRPO settings (seq-mean-token-mean loss, ε 0.2,
β 0, lr 2e-4, one optimizer step per rollout, fp32 on the CPU), same grader
(argym's math-verify grading). Each framework runs in its own child process
(so peak RSS is its own); the parent prints the medians and the ratios.
`--bf16` runs both with bf16 autocast over float32 weights (argym's
`policy.mixed_precision=bf16`, TRL's `bf16=True`, `GRPOConfig`'s default).

    .venv/bin/python benchmarks/vs_trl.py [--steps 8] [--warmup 2] [--bf16] [--json out.json]

Needs the `trl` extra (pip install 'argym[trl]').
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PROMPTS, GROUP, NEW_TOKENS, LR, SEED = 32, 8, 16, 2e-4, 0


def run_argym(steps: int, warmup: int, bf16: bool) -> dict:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    out = tempfile.mkdtemp(prefix="argym-vs-trl-")
    cfg = load_config(
        None,
        [
            "warm_start.steps=0",
            "eval.every=0",
            f"steps={steps + warmup}",
            f"out_dir={out}",
            f"rollout.tasks_per_step={PROMPTS}",
            f"rollout.group_size={GROUP}",
            f"rollout.max_new_tokens={NEW_TOKENS}",
            f"algorithm.lr={LR}",
            f"seed={SEED}",
            f"policy.mixed_precision={'bf16' if bf16 else 'no'}",
        ],
    )  # the recipe's micro_batch_size (64)
    trainer = Trainer(cfg)
    times, rollout, update = [], [], []
    try:
        for i in range(steps + warmup):
            t0 = time.perf_counter()
            m = trainer.train_step()
            trainer.step += 1
            if i >= warmup:
                times.append(time.perf_counter() - t0)
                rollout.append(m["perf/rollout_s"])
                update.append(m["perf/update_s"])
    finally:
        trainer.close()
    return {"step_s": times, "rollout_s": rollout, "update_s": update}


def run_trl(steps: int, warmup: int, bf16: bool) -> dict:
    import numpy as np
    from _trl import TIMED, grpo_trainer
    from datasets import Dataset
    from transformers import TrainerCallback

    from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    from argym.envs.math.arithmetic import arithmetic_source
    from argym.envs.math.verifier import extract_answer, verify_answer

    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, TinyModelConfig(), seed=SEED)
    src, rng = arithmetic_source(digits=2, ops="+", terms=2), np.random.default_rng(SEED)
    tasks = [src.sample(rng, "train") for _ in range(PROMPTS * (steps + warmup + 1))]
    ds = Dataset.from_dict(
        {"prompt": [[dict(m) for m in t.prompt] for t in tasks], "answer": [t.answer for t in tasks]}
    )

    def reward(completions, answer, **kw):
        out = []
        for c, gold in zip(completions, answer):
            text = c[-1]["content"] if isinstance(c, list) else c
            ans = extract_answer(text)
            out.append(float(ans is not None and verify_answer(gold, ans)))
        return out

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    trainer = grpo_trainer(
        model,
        tok,
        reward,
        ds,
        Timer(),
        prompts=PROMPTS,
        group=GROUP,
        new_tokens=NEW_TOKENS,
        seed=SEED,
        output_dir=tempfile.mkdtemp(prefix="trl-vs-argym-"),
        bf16=bf16,
        use_cpu=True,
        learning_rate=LR,
        **TIMED,
        max_steps=steps + warmup,
    )
    trainer.train()
    return {"step_s": times[warmup:]}


def child(which: str, steps: int, warmup: int, bf16: bool) -> None:
    import torch

    torch.manual_seed(SEED)
    res = run_argym(steps, warmup, bf16) if which == "argym" else run_trl(steps, warmup, bf16)
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res["threads"] = torch.get_num_threads()
    print("RESULT " + json.dumps(res))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="alternate argym and TRL children this many times (evens out a shared machine's load)",
    )
    ap.add_argument("--bf16", action="store_true", help="both with bf16 autocast (float32 weights)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.steps, a.warmup, a.bf16)
    results: dict = {"argym": {"step_s": [], "peak_rss_mb": 0.0}, "trl": {"step_s": [], "peak_rss_mb": 0.0}}
    for _ in range(a.rounds):
        for which in ("argym", "trl"):
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    which,
                    "--steps",
                    str(a.steps),
                    "--warmup",
                    str(a.warmup),
                    *(["--bf16"] if a.bf16 else []),
                ],
                capture_output=True,
                text=True,
            )
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode or not line:
                sys.exit(f"{which} failed:\n{proc.stderr[-4000:]}")
            r = json.loads(line[-1][7:])
            acc = results[which]
            for k, v in r.items():
                if isinstance(v, list):
                    acc.setdefault(k, []).extend(v)
            acc["peak_rss_mb"] = max(acc["peak_rss_mb"], r["peak_rss_mb"])
            acc["threads"] = r["threads"]
    for which in ("argym", "trl"):
        results[which]["median_step_s"] = statistics.median(results[which]["step_s"])
    ar, tr = results["argym"], results["trl"]
    results["ratio"] = {
        "step_time_trl_over_argym": tr["median_step_s"] / ar["median_step_s"],
        "peak_rss_trl_over_argym": tr["peak_rss_mb"] / ar["peak_rss_mb"],
    }
    print(
        f"setting: {PROMPTS} prompts × {GROUP} samples, {NEW_TOKENS} new tokens, tiny Qwen2 ({'bf16 autocast' if a.bf16 else 'fp32'}, CPU, "
        f"{ar['threads']} threads), median of {a.rounds}×{a.steps} steps after {a.warmup} warm-up each"
    )
    print(f"{'':8} {'s/step':>8} {'peak RSS MB':>12}")
    for k in ("argym", "trl"):
        print(f"{k:8} {results[k]['median_step_s']:8.3f} {results[k]['peak_rss_mb']:12.0f}")
    print(
        f"argym split: rollout {statistics.median(ar['rollout_s']):.3f} s, update {statistics.median(ar['update_s']):.3f} s"
    )
    print(
        f"TRL / argym: step time ×{results['ratio']['step_time_trl_over_argym']:.2f}, "
        f"peak memory ×{results['ratio']['peak_rss_trl_over_argym']:.2f}"
    )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
