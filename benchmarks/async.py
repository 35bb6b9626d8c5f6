"""Sync vs async rollouts, side by side in one run: trajectories per second and held-out accuracy per sample.

The workload is one where env latency matters: `argym/Math-v0` (two-digit addition,
2 attempts, so an episode has up to two env steps) with an artificial latency before
every training env step, drawn from a long-tailed lognormal distribution,
latency = exp(N(ln median, σ²)) seconds (default median 0.2 s, σ = 1: mean 0.33 s,
p99 2.0 s), seeded by the episode's reset seed so every mode sees the same latencies
for the same episodes. Only the RL steps wait: the warm start's oracle episodes and the
held-out evaluations do not (`SlowMath.enabled`).

Each mode trains the tiny policy from the same warm start (same seeds) for the same
number of steps, i.e. on the same number of samples, then evaluates greedily on the
same held-out tasks. Trajectories/s count the trained trajectories over the wall time
of `fit()` (rollouts and updates; the warm start and evaluations excluded). Every mode
uses the same learner settings, the truncated importance weight (`algorithm.tis_cap`)
included, so only the rollout mode differs.

    python benchmarks/async.py                              # sync, async staleness 1 and 4
    python benchmarks/async.py --steps 4 --eval-episodes 20  # a quick check

Torch runs one intra-op thread in every mode (`OMP_NUM_THREADS=1`, set here before torch
loads): on a machine whose cores are shared, two OpenMP threads per op measured 30x slower
than one for the tiny model, and threads created later (async's) would not inherit a
`torch.set_num_threads` of the main thread, which would compare two thread settings.
"""

from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported (see the docstring)

import argparse
import json
import math
import time
from pathlib import Path
from tempfile import TemporaryDirectory

import gymnasium as gym
import numpy as np
from argym.envs.math.env import MathEnv

SLOW_MATH = "argym-bench/SlowMath-v0"


class SlowMath(MathEnv):
    """Math whose steps wait a lognormal time first (an env that calls a slow grader or tool), while `enabled`."""

    enabled = False

    def __init__(self, latency_median: float = 0.1, latency_sigma: float = 1.0, **kw):
        super().__init__(**kw)
        self.latency = (math.log(latency_median), latency_sigma)
        self._latency_rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        self._latency_rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if SlowMath.enabled:
            time.sleep(float(self._latency_rng.lognormal(*self.latency)))
        return super().step(action)


if SLOW_MATH not in gym.registry:
    gym.register(SLOW_MATH, entry_point=SlowMath, order_enforce=False, disable_env_checker=True)


def run_mode(name: str, overrides: list[str], out: Path) -> dict:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer
    from rich.console import Console

    cfg = load_config(None, [*overrides, f"out_dir={out / name}"])
    trainer = Trainer(cfg, Console(quiet=True))
    try:
        before = trainer.evaluate()
        SlowMath.enabled = True
        t0 = time.perf_counter()
        try:
            trainer.fit()
        finally:
            SlowMath.enabled = False
        seconds = time.perf_counter() - t0
        after = trainer.evaluate()
    finally:
        trainer.close()
    records = trainer.metrics.records()
    trajectories = cfg.steps * cfg.rollout.tasks_per_step * cfg.rollout.group_size
    row = {
        "mode": name,
        "fit_s": seconds,
        "trajectories": trajectories,
        "trajectories_per_s": trajectories / seconds,
        "rollout_wait_s_per_step": float(np.mean([r["perf/rollout_s"] for r in records])),
        "update_s_per_step": float(np.mean([r["perf/update_s"] for r in records])),
        "version_lag_mean": float(np.mean([r.get("train/version_lag_mean", 0.0) for r in records])),
        "version_lag_max": float(max(r.get("train/version_lag_max", 0.0) for r in records)),
        "train_success_mean": float(np.mean([r["train/success"] for r in records])),
        "accuracy_before": before.mean,
        "accuracy_after": after.mean,
        "accuracy_after_ci": [after.ci_low, after.ci_high],
        "eval_n": after.n,
    }
    print(
        f"{name:>8}: {row['trajectories_per_s']:.2f} traj/s ({seconds:.0f} s), held-out "
        f"{before.mean:.3f} -> {after.mean:.3f} [{after.ci_low:.3f}, {after.ci_high:.3f}], "
        f"lag mean {row['version_lag_mean']:.2f} max {row['version_lag_max']:.0f}",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--tasks-per-step", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--warm-start-steps", type=int, default=100)
    ap.add_argument("--eval-episodes", type=int, default=100)
    ap.add_argument("--latency-median", type=float, default=0.2)
    ap.add_argument("--latency-sigma", type=float, default=1.0)
    ap.add_argument("--staleness", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/async.json"))
    args = ap.parse_args()
    common = [
        f"env.id={SLOW_MATH}",
        "env.kwargs.tasks=arithmetic(digits=2,ops=+,terms=2)",
        "env.kwargs.max_attempts=2",
        f"env.kwargs.latency_median={args.latency_median}",
        f"env.kwargs.latency_sigma={args.latency_sigma}",
        f"steps={args.steps}",
        f"rollout.tasks_per_step={args.tasks_per_step}",
        f"rollout.group_size={args.group_size}",
        f"warm_start.steps={args.warm_start_steps}",
        f"eval.episodes={args.eval_episodes}",
        "eval.every=0",
        f"checkpoint_every={args.steps}",
        "algorithm.tis_cap=2.0",
    ]
    modes = [("sync", ["rollout.mode=sync"])] + [
        (f"async-{s}", ["rollout.mode=async", f"rollout.max_staleness={s}"]) for s in args.staleness
    ]
    with TemporaryDirectory() as tmp:
        rows = [run_mode(name, common + extra, Path(tmp)) for name, extra in modes]
    sync = rows[0]["trajectories_per_s"]
    for row in rows:
        row["speedup_vs_sync"] = row["trajectories_per_s"] / sync
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "workload": {
            "env": "argym/Math-v0, 2 attempts, two-digit addition",
            "latency": f"lognormal per training env step: median {args.latency_median} s, sigma {args.latency_sigma}",
            "policy": "tiny (TinyModelConfig defaults), CPU, one torch thread",
        },
        "settings": vars(args) | {"out": str(args.out)},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for row in rows:
        print(f"{row['mode']:>8}: {row['speedup_vs_sync']:.2f}x sync's trajectories/s")


if __name__ == "__main__":
    main()
