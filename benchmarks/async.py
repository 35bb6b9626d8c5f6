"""Sync vs async rollouts, side by side in one run: trajectories per second and held-out accuracy per sample.

Two workloads where env latency matters (`--workload`), each written to its own file:

- ``math`` (default, `benchmarks/results/async.json`): `argym/Math-v0` (two-digit addition,
  2 attempts, so an episode has up to two env steps) with an artificial latency before
  every training env step, drawn from a long-tailed lognormal distribution,
  latency = exp(N(ln median, σ²)) seconds (default median 0.2 s, σ = 1: mean 0.33 s,
  p99 2.0 s), seeded by the episode's reset seed so every mode sees the same latencies
  for the same episodes.
- ``code`` (`benchmarks/results/async_code.json`): `argym/Code-v0` on the procedural
  function tasks, 2 attempts, every attempt's hidden tests run in the ``process`` sandbox
  (bubblewrap): the latency is real program execution, no sleep. The recipe is
  `configs/grpo_code.yaml` (its tiny policy and warm start on the oracle's solutions);
  40 held-out tasks, as the procedural source has only 46 distinct test prompts.

Only the RL steps are slowed and timed: the warm start's oracle episodes and the held-out
evaluations are not (`Timed.on`). Each row carries the measured env-step time (the
grading, or the sleep, included): the latency async overlaps with generation and updates.

Each mode trains the tiny policy from the same warm start (trained once, seed 0) for the same
number of steps, i.e. on the same number of samples, then evaluates greedily on the
same held-out tasks. Trajectories/s count the trained trajectories over the wall time
of `fit()` (rollouts and updates; the warm start and evaluations excluded). Every mode
uses the same learner settings, the truncated importance weight (`algorithm.tis_cap`)
included, so only the rollout mode differs. ``async-S`` streams episodes with partial rollouts
(staleness at most S); ``fixed-S`` samples each batch whole at a lag of S (`rollout.partial=false`:
the lockstep engine, reproducible from the seed).

    python benchmarks/async.py                              # math: sync, async staleness 1 and 4, fixed lag 1
    python benchmarks/async.py --workload code              # code, through the process sandbox
    python benchmarks/async.py --steps 4 --eval-episodes 20  # a quick check
    python benchmarks/async.py --seed 1                     # another RL seed from the same warm start

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

from algorithms import warm_start
from argym.envs.code.env import CodeEnv
from argym.envs.math.env import MathEnv

SLOW_MATH = "argym-bench/SlowMath-v0"
TIMED_CODE = "argym-bench/TimedCode-v0"
CODE_RECIPE = Path(__file__).resolve().parents[1] / "configs" / "grpo_code.yaml"


class Timed:
    """Mixin (first base): records each env step's wall time while `on`, the latency that async overlaps."""

    on = False  # only fit()'s RL steps: the warm start's and the evaluations' episodes are neither slowed nor timed
    step_s: list[float] = []  # appended from the rollout threads (list.append is atomic)

    def step(self, action):
        t0 = time.perf_counter()
        out = super().step(action)
        if Timed.on:
            Timed.step_s.append(time.perf_counter() - t0)
        return out


class SlowMath(MathEnv):
    """Math whose steps wait a lognormal time first (an env that calls a slow grader or tool), while `Timed.on`."""

    def __init__(self, latency_median: float = 0.1, latency_sigma: float = 1.0, **kw):
        super().__init__(**kw)
        self.latency = (math.log(latency_median), latency_sigma)
        self._latency_rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        self._latency_rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if Timed.on:
            time.sleep(float(self._latency_rng.lognormal(*self.latency)))
        return super().step(action)


for _id, _env in ((SLOW_MATH, SlowMath), (TIMED_CODE, CodeEnv)):
    if _id not in gym.registry:
        _timed = type(
            f"Timed{_env.__name__}", (Timed, _env), {"__doc__": f"{_env.__name__}, its steps timed."}
        )
        gym.register(_id, entry_point=_timed, order_enforce=False, disable_env_checker=True)


def workload(args: argparse.Namespace) -> tuple[Path | None, list[str], dict[str, str], Path]:
    """The one place the workloads differ: the recipe, its env overrides, what the JSON says of it, the output."""
    if args.workload == "math":
        return (
            None,
            [
                f"env.id={SLOW_MATH}",
                "env.kwargs.tasks=arithmetic(digits=2,ops=+,terms=2)",
                "env.kwargs.max_attempts=2",
                f"env.kwargs.latency_median={args.latency_median}",
                f"env.kwargs.latency_sigma={args.latency_sigma}",
            ],
            {
                "env": "argym/Math-v0, 2 attempts, two-digit addition",
                "latency": f"lognormal per training env step: median {args.latency_median} s, "
                f"sigma {args.latency_sigma}",
                "policy": "tiny (TinyModelConfig defaults), CPU, one torch thread",
            },
            Path("benchmarks/results/async.json"),
        )
    return (
        CODE_RECIPE,
        [
            f"env.id={TIMED_CODE}",
            "env.kwargs.tasks=functions(test_size=40)",  # the source has only 46 distinct test prompts
            "env.kwargs.max_attempts=2",
            "env.kwargs.sandbox=process",
        ],
        {
            "env": "argym/Code-v0, 2 attempts, procedural function tasks (40 held out), summary feedback",
            "latency": "real: each attempt's hidden tests run in the process sandbox (bubblewrap), no sleep",
            "policy": "tiny (configs/grpo_code.yaml), CPU, one torch thread",
        },
        Path("benchmarks/results/async_code.json"),
    )


def run_mode(name: str, recipe: Path | None, overrides: list[str], out: Path) -> dict:
    from rich.console import Console

    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(recipe, [*overrides, f"out_dir={out / name}"])
    trainer = Trainer(cfg, Console(quiet=True))
    try:
        before = trainer.evaluate()
        Timed.step_s.clear()
        Timed.on = True
        t0 = time.perf_counter()
        try:
            trainer.fit()
        finally:
            Timed.on = False
        seconds = time.perf_counter() - t0
        after = trainer.evaluate()
    finally:
        trainer.close()
    records = trainer.metrics.records()
    trajectories = cfg.steps * cfg.rollout.tasks_per_step * cfg.rollout.group_size
    step_s = np.array(Timed.step_s)
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
        "env_steps": len(step_s),  # every RL env step fit() took, discarded groups' included
        "env_step_s_median": float(np.median(step_s)),
        "env_step_s_p90": float(np.percentile(step_s, 90)),
        "env_step_s_mean": float(step_s.mean()),
    }
    print(
        f"{name:>8}: {row['trajectories_per_s']:.2f} traj/s ({seconds:.0f} s), held-out "
        f"{before.mean:.3f} -> {after.mean:.3f} [{after.ci_low:.3f}, {after.ci_high:.3f}], "
        f"lag mean {row['version_lag_mean']:.2f} max {row['version_lag_max']:.0f}, env step median "
        f"{row['env_step_s_median']:.3f} s p90 {row['env_step_s_p90']:.3f} s ({len(step_s)} steps)",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=["math", "code"], default="math")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--tasks-per-step", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--warm-start-steps", type=int, default=100)
    ap.add_argument("--eval-episodes", type=int, default=100)
    ap.add_argument("--latency-median", type=float, default=0.2, help="math only")
    ap.add_argument("--latency-sigma", type=float, default=1.0, help="math only")
    ap.add_argument("--staleness", type=int, nargs="+", default=[1, 4])
    ap.add_argument(
        "--fixed-lag",
        type=int,
        nargs="*",
        default=[1],
        help="async arms at a fixed lag (rollout.partial=false: reproducible, no partial rollouts)",
    )
    ap.add_argument(
        "--seed", type=int, default=0, help="the RL phase's seed (the warm start is always seed 0's)"
    )
    ap.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/async[_code].json")
    args = ap.parse_args()
    recipe, env_overrides, description, default_out = workload(args)
    args.out = args.out or default_out
    common = [
        *env_overrides,
        f"steps={args.steps}",
        f"rollout.tasks_per_step={args.tasks_per_step}",
        f"rollout.group_size={args.group_size}",
        f"warm_start.steps={args.warm_start_steps}",
        f"eval.episodes={args.eval_episodes}",
        "eval.every=0",
        f"checkpoint_every={args.steps}",
        "algorithm.tis_cap=2.0",
    ]
    modes = (
        [("sync", ["rollout.mode=sync"])]
        + [(f"async-{s}", ["rollout.mode=async", f"rollout.max_staleness={s}"]) for s in args.staleness]
        + [
            (f"fixed-{s}", ["rollout.mode=async", f"rollout.max_staleness={s}", "rollout.partial=false"])
            for s in args.fixed_lag
        ]
    )
    with TemporaryDirectory() as tmp:
        # every mode would train the identical warm start (same recipe and seed): train it once
        warm = warm_start(Path(tmp), 0, common, str(recipe) if recipe else None)
        shared = [*common, "policy.kind=hf", f"policy.path={warm}", "warm_start.steps=0", f"seed={args.seed}"]
        rows = [run_mode(name, recipe, shared + extra, Path(tmp)) for name, extra in modes]
    sync = rows[0]["trajectories_per_s"]
    for row in rows:
        row["speedup_vs_sync"] = row["trajectories_per_s"] / sync
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "workload": {"name": args.workload, **description},
        "settings": vars(args) | {"out": str(args.out)},
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    for row in rows:
        print(f"{row['mode']:>8}: {row['speedup_vs_sync']:.2f}x sync's trajectories/s")


if __name__ == "__main__":
    main()
