"""R³L vs plain GRPO on a multi-turn env where retries matter: held-out success vs samples and wall time.

argym/Math-v0 with three attempts (a wrong answer is told "Incorrect, try
again"). The tiny policy is warm-started once on oracle answers; then, from
that same checkpoint and with the same seeds, it is trained

- with GRPO (`configs/grpo_math.yaml`'s algorithm, 8 ordinary rollouts per task), and
- with R³L (`configs/r3l_math.yaml`: 4 ordinary rollouts + 4 retries of the failed
  ones from the pivot, rule-based reflector, α = 3 amplification, OPMD loss),

and evaluated greedily on the same held-out tasks every `--eval-every` steps.
"Samples" counts every trajectory rolled out (retries included). Writes
`<out>/r3l_curves.png`, `<out>/r3l_results.json` and prints a Markdown table.

    .venv/bin/python benchmarks/r3l.py [--steps 40] [--eval-every 10] [--episodes 300] [--warm-from DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = ["env.kwargs.tasks=arithmetic(digits=2,ops=+,terms=2)", "env.kwargs.max_attempts=3"]


def warm_start(run_dir: Path, overrides: list[str]) -> Path:
    """One supervised warm start on oracle answers, shared by every variant."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(None, overrides + ["steps=0", f"out_dir={run_dir / 'warm'}"])
    Trainer(cfg).close()
    return run_dir / "warm" / "checkpoint" / "policy"


def run_variant(
    name: str,
    recipe: str | None,
    policy_dir: Path,
    run_dir: Path,
    steps: int,
    eval_every: int,
    episodes: int,
    overrides: list[str],
) -> dict:
    """Train one variant from the shared checkpoint; held-out success every `eval_every` steps."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(
        recipe,
        overrides
        + [
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
    extra: dict[str, list[float]] = {}
    try:
        for step in range(1, steps + 1):
            t = time.perf_counter()
            trainer.step = step - 1
            trajs, collected = trainer.collect()
            metrics = trainer.learner.update(trajs, trainer.policy.pad_id)
            train_s += time.perf_counter() - t
            samples += len(trajs)  # every trajectory rolled out and trained on, retries included
            for k, v in collected.items():
                if k.startswith("r3l/"):  # the strategy's own metrics
                    extra.setdefault(k, []).append(v)
            if step % eval_every == 0 or step == steps:
                curve.append(
                    {
                        "step": step,
                        "samples": samples,
                        "seconds": train_s,
                        "accuracy": trainer.evaluate(episodes).mean,
                    }
                )
                print(
                    f"  {name:8} step {step:4d}  acc {curve[-1]['accuracy']:.3f}  {train_s:6.0f} s  "
                    f"loss {metrics.get('train/loss', 0):.3f}",
                    flush=True,
                )
    finally:
        trainer.close()
    return {"variant": name, "curve": curve, "strategy": {k: sum(v) / len(v) for k, v in extra.items()}}


def plot(results: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for r in results:
        xs = r["curve"]
        axes[0].plot([p["samples"] for p in xs], [p["accuracy"] for p in xs], marker="o", label=r["variant"])
        axes[1].plot([p["seconds"] for p in xs], [p["accuracy"] for p in xs], marker="o", label=r["variant"])
    axes[0].set_xlabel("trajectories sampled")
    axes[1].set_xlabel("training wall-clock (s)")
    for ax in axes:
        ax.set_ylabel("held-out success")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def table(results: list[dict]) -> str:
    rows = [
        "| variant | start | end | gain | trajectories | training s |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        a, b = r["curve"][0], r["curve"][-1]
        rows.append(
            f"| {r['variant']} | {a['accuracy']:.3f} | {b['accuracy']:.3f} | "
            f"{100 * (b['accuracy'] - a['accuracy']):+.1f} pts | {b['samples']:,} | {b['seconds']:.0f} |"
        )
    return "\n".join(rows)


def smollm2(args: argparse.Namespace) -> None:
    """R³L with the policy reflecting on itself (the paper's setting), short, on the CPU."""
    result = run_variant(
        "r3l-smollm2",
        str(REPO / "configs" / "r3l_smollm2.yaml"),
        Path("smollm2"),
        args.run_dir,
        args.steps,
        args.eval_every,
        args.episodes,
        [f"rollout.tasks_per_step={args.tasks_per_step}"],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "r3l_smollm2_results.json").write_text(json.dumps(result, indent=2))
    print(table([result]))
    print(f"R³L metrics (means over steps): {json.dumps(result['strategy'])}")


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--tasks-per-step", type=int, default=16)
    ap.add_argument("--warm-steps", type=int, default=400)
    ap.add_argument(
        "--warm-from",
        type=Path,
        default=None,
        help="reuse a warm-started policy dir (e.g. runs/bench_algorithms/warm/checkpoint/policy: "
        "the quickstart's warm start on the same tasks) instead of training one",
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--smollm2",
        action="store_true",
        help="instead: R³L alone with SmolLM2-135M-Instruct as its own reflector (configs/r3l_smollm2.yaml)",
    )
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--run-dir", type=Path, default=REPO / "runs" / "bench_r3l")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    if args.smollm2:
        smollm2(args)
        print(f"total {time.perf_counter() - t0:.0f} s")
        return
    common = ENV + [f"rollout.tasks_per_step={args.tasks_per_step}", f"warm_start.steps={args.warm_steps}"]
    policy_dir = args.warm_from or warm_start(args.run_dir, common)
    results = [
        run_variant(
            "grpo", None, policy_dir, args.run_dir, args.steps, args.eval_every, args.episodes, common
        ),
        run_variant(
            "r3l",
            str(REPO / "configs" / "r3l_math.yaml"),
            policy_dir,
            args.run_dir,
            args.steps,
            args.eval_every,
            args.episodes,
            common,
        ),
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "r3l_results.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "r3l_curves.png", "R³L vs GRPO, Math-v0 (3 attempts), tiny policy")
    print(table(results))
    print(f"R³L metrics (means over steps): {json.dumps(results[1]['strategy'])}")
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
