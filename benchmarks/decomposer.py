"""Dense (verified Decomposer-Reasoner) vs sparse outcome reward on arithmetic chains: accuracy vs samples.

Both arms run the same episodes of `argym/DecomposeReasoner-v0` around
argym/Math-v0's chains ``arithmetic(digits=1,ops=+*,terms=4)`` (decomposition
turn, one turn per checkable sub-question, final answer), from one shared warm
start on the oracle decomposition, with GRPO and the same seeds. Only the
reward differs:

- ``sparse``: λ = 0, the final answer's outcome alone;
- ``dense``:  λ = 0.5, outcome + λ·PURE min-form of the verified step scores.

Held-out *final-answer* accuracy (the env's `success`) is measured greedily on
the same test tasks every `--eval-every` steps. Writes
`<out>/decomposer_curves.png`, `<out>/decomposer_results.json` and prints a table.

    .venv/bin/python benchmarks/decomposer.py [--steps 30] [--eval-every 10] [--episodes 200]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "decomposer_verified.yaml"


def warm_start(run_dir: Path, overrides: list[str]) -> Path:
    """One supervised warm start on the wrapper oracle's episodes, shared by both arms."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(RECIPE, overrides + ["steps=0", f"out_dir={run_dir / 'warm'}"])
    Trainer(cfg).close()
    return run_dir / "warm" / "checkpoint" / "policy"


def run_arm(
    name: str,
    lam: float,
    policy_dir: Path,
    run_dir: Path,
    steps: int,
    eval_every: int,
    episodes: int,
    overrides: list[str],
) -> dict:
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(
        RECIPE,
        overrides
        + [
            f"env.kwargs.lam={lam}",
            "policy.kind=hf",
            f"policy.path={policy_dir}",
            "warm_start.steps=0",
            f"steps={steps}",
            "eval.every=0",
            f"out_dir={run_dir / name}",
            f"checkpoint_every={10**6}",
        ],
    )
    trainer = Trainer(cfg)
    samples, train_s = 0, 0.0
    curve = [{"step": 0, "samples": 0, "seconds": 0.0, "accuracy": trainer.evaluate(episodes).mean}]
    try:
        for step in range(1, steps + 1):
            t = time.perf_counter()
            trainer.step = step - 1
            trajs, _ = trainer.collect()
            metrics = trainer.learner.update(trajs, trainer.policy.pad_id)
            train_s += time.perf_counter() - t
            samples += len(trajs)
            if step % eval_every == 0 or step == steps:
                curve.append(
                    {
                        "step": step,
                        "samples": samples,
                        "seconds": train_s,
                        "accuracy": trainer.evaluate(episodes).mean,
                        "train_success": sum(x.success for x in trajs) / len(trajs),
                        "train_reward": sum(x.reward for x in trajs) / len(trajs),
                    }
                )
                print(
                    f"  {name:7} step {step:4d}  acc {curve[-1]['accuracy']:.3f}  {train_s:6.0f} s  "
                    f"reward {curve[-1]['train_reward']:.3f}  loss {metrics.get('train/loss', 0):.3f}",
                    flush=True,
                )
    finally:
        trainer.close()
    return {"variant": name, "lam": lam, "curve": curve}


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--tasks-per-step", type=int, default=16)
    ap.add_argument("--warm-steps", type=int, default=400)
    ap.add_argument("--warm-batch", type=int, default=64)
    ap.add_argument(
        "--warm-from", type=Path, default=None, help="reuse a warm-started policy dir of the same tasks"
    )
    ap.add_argument(
        "--tasks", default="arithmetic(digits=1,ops=+*,terms=4)", help="the wrapped Math env's tasks="
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--run-dir", type=Path, default=REPO / "runs" / "bench_decomposer")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    common = [
        f"env.kwargs.tasks={args.tasks}",
        f"rollout.tasks_per_step={args.tasks_per_step}",
        f"warm_start.steps={args.warm_steps}",
        f"warm_start.batch_size={args.warm_batch}",
    ]
    t0 = time.perf_counter()
    policy_dir = args.warm_from or warm_start(args.run_dir, common)
    results = [
        run_arm(name, lam, policy_dir, args.run_dir, args.steps, args.eval_every, args.episodes, common)
        for name, lam in (("sparse", 0.0), ("dense", 0.5))
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "decomposer_results.json").write_text(json.dumps(results, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        ax.plot(
            [p["samples"] for p in r["curve"]],
            [p["accuracy"] for p in r["curve"]],
            marker="o",
            label=f"{r['variant']} (λ={r['lam']})",
        )
    ax.set_xlabel("trajectories sampled")
    ax.set_ylabel("held-out final-answer accuracy")
    ax.set_title("Dense (verified decomposition) vs sparse reward")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "decomposer_curves.png", dpi=120)
    print(
        "| reward | start | end | gain | trajectories | training s |\n| --- | --- | --- | --- | --- | --- |"
    )
    for r in results:
        a, b = r["curve"][0], r["curve"][-1]
        print(
            f"| {r['variant']} (λ={r['lam']}) | {a['accuracy']:.3f} | {b['accuracy']:.3f} | "
            f"{100 * (b['accuracy'] - a['accuracy']):+.1f} pts | {b['samples']:,} | {b['seconds']:.0f} |"
        )
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
