"""Every preset on the same Math task, from the same warm start and seeds: learning curves side by side.

The tiny policy is warm-started once (the quickstart's supervised warm start),
then each preset (`argym.algorithms.presets`) trains a copy of it with the
quickstart's scale (lr 2e-4, one mini-batch) and the preset's algorithm.
Held-out greedy accuracy is measured on the same test tasks every
`--eval-every` steps. Writes `<out>/curves.png` (accuracy vs. samples and vs.
wall-clock), `<out>/results.json`, and prints a Markdown table.

    .venv/bin/python benchmarks/algorithms.py [--steps 100] [--presets grpo,dapo,...] [--out runs/bench_algorithms]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def warm_start(out: Path, overrides: list[str]) -> Path:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(None, overrides + ["steps=0", f"out_dir={out / 'warm'}"])
    trainer = Trainer(cfg)
    trainer.close()
    return out / "warm" / "checkpoint" / "policy"


def run_preset(name: str, policy_dir: Path, out: Path, steps: int, eval_every: int, episodes: int,
               overrides: list[str]) -> dict:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(None, overrides + [f"algo={name}", "policy.kind=hf", f"policy.path={policy_dir}",
                                         "warm_start.steps=0", f"steps={steps}", "eval.every=0",
                                         f"out_dir={out / name.replace('+', 'p')}", f"checkpoint_every={10**6}"])
    t0 = time.perf_counter()
    trainer = Trainer(cfg)  # VAPO's value pretraining happens here and counts in wall-clock and samples
    per_draw = cfg.rollout.tasks_per_step * cfg.rollout.group_size
    samples = per_draw * cfg.algorithm.value_pretrain_steps if cfg.algorithm.advantage == "gae" else 0
    train_s = time.perf_counter() - t0
    curve = [{"step": 0, "samples": samples, "seconds": train_s, "accuracy": trainer.evaluate(episodes).mean}]
    try:
        for step in range(1, steps + 1):
            t = time.perf_counter()
            m = trainer.train_step()
            trainer.step = step
            train_s += time.perf_counter() - t
            samples += per_draw * int(m.get("sampling/draws", 1))
            if step % eval_every == 0 or step == steps:
                curve.append({"step": step, "samples": samples, "seconds": train_s,
                              "accuracy": trainer.evaluate(episodes).mean})
                print(f"  {name:12} step {step:4d}  acc {curve[-1]['accuracy']:.3f}  {train_s:6.0f} s", flush=True)
    finally:
        trainer.close()
    return {"preset": name, "curve": curve}


def summarise(results: list[dict], threshold: float) -> list[dict]:
    rows = []
    for r in results:
        c = r["curve"]
        reach = next((p["samples"] for p in c if p["accuracy"] >= threshold), None)
        rows.append({"preset": r["preset"], "start": c[0]["accuracy"], "final": c[-1]["accuracy"],
                     "gain": c[-1]["accuracy"] - c[0]["accuracy"], "best": max(p["accuracy"] for p in c),
                     "samples_to_threshold": reach, "train_seconds": c[-1]["seconds"]})
    return rows


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for r in results:
        c = r["curve"]
        axes[0].plot([p["samples"] for p in c], [p["accuracy"] for p in c], marker="o", label=r["preset"])
        axes[1].plot([p["seconds"] for p in c], [p["accuracy"] for p in c], marker="o", label=r["preset"])
    axes[0].set_xlabel("samples (trajectories rolled out)")
    axes[1].set_xlabel("wall-clock training seconds")
    axes[0].set_ylabel("held-out accuracy (greedy)")
    axes[1].legend()
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("argym presets on argym/Math-v0, two-digit addition, tiny policy, same warm start")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    from argym.algorithms.presets import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--out", default="runs/bench_algorithms")
    ap.add_argument("overrides", nargs="*", help="key=value overrides of the quickstart recipe for every run")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    policy_dir = warm_start(out, a.overrides)
    results = []
    for name in a.presets.split(","):
        results.append(run_preset(name, policy_dir, out, a.steps, a.eval_every, a.episodes, a.overrides))
        (out / "results.json").write_text(json.dumps(results, indent=2))
    rows = summarise(results, a.threshold)
    (out / "results.json").write_text(json.dumps({"runs": results, "table": rows}, indent=2))
    plot(results, out / "curves.png")
    print(f"\n| preset | warm start | final | gain | best | samples to {a.threshold:.0%} | train s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        reach = r["samples_to_threshold"] if r["samples_to_threshold"] is not None else "—"
        print(f"| {r['preset']} | {r['start']:.3f} | {r['final']:.3f} | {r['gain']:+.3f} | {r['best']:.3f} | "
              f"{reach} | {r['train_seconds']:.0f} |")


if __name__ == "__main__":
    main()
