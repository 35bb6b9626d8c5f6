"""An agent program trained through argym's endpoint vs the same policy trained by the rollout engine.

Both arms start from one warm-started checkpoint of `configs/grpo_program.yaml`'s
policy on `argym/ToolCall-v0` executable tasks and train with the same recipe, seeds
and samples per step: the engine arm with `rollout.strategy: plain`, the program arm
with `rollout.strategy: program` running `examples/agent_program.py` (a 20-line loop
over the official OpenAI client). Reported per arm: held-out greedy accuracy with its
95% interval (the program arm evaluated through the program, and through the engine
for a like-for-like number), and the mean rollout seconds per step; the program's
per-step overhead is its rollout time over the engine's. The row `before` is the warm
start itself, evaluated the same two ways. A warm start already in `--out` is reused, and
so are the rows of an earlier run there with the same settings that `--arms` leaves out
(a run cut short re-runs only the arm it lost); `--arms before` evaluates a warm start alone.

    .venv/bin/python benchmarks/program_vs_engine.py [--steps 100] [--episodes 200] [--tasks-per-step N] [--arms before,engine,program] [--out runs/bench_program] [key=value ...]
    .venv/bin/python benchmarks/program_vs_engine.py --small --steps 3   # a CPU smoke run: tiny sizes
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "grpo_program.yaml"
SMALL = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.num_heads=2",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.max_positions=1024",
    "warm_start.steps=20",
    "warm_start.tasks=64",
    "warm_start.batch_size=8",
    "rollout.tasks_per_step=4",
    "rollout.group_size=4",
    "rollout.max_new_tokens=48",
    "rollout.max_total_tokens=1024",
    "algorithm.micro_batch_size=16",
]


def warm_start(out: Path, overrides: list[str]) -> Path:
    """The shared starting checkpoint; one left in `out` by an earlier run of the same recipe is reused."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    policy = out / "warm" / "checkpoint" / "policy"
    if policy.is_dir():
        print(f"reusing the warm start in {policy}", flush=True)
        return policy
    cfg = load_config(
        RECIPE, overrides + ["steps=0", "rollout.strategy=plain", "agent.program=", f"out_dir={out / 'warm'}"]
    )
    Trainer(cfg).close()
    return policy


def run_arm(
    arm: str, policy_dir: Path, out: Path, steps: int, episodes: int, overrides: list[str], label: str = ""
) -> dict:
    """Train `steps` RL steps from `policy_dir` (0: only evaluate it) and evaluate on the test split."""
    from argym.agents.evaluate import evaluate
    from argym.agents.policy import SamplingParams
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    program = (
        [f"agent.program={REPO / 'examples' / 'agent_program.py'}:solve"]
        if arm == "program"
        else ["rollout.strategy=plain", "agent.program="]
    )
    cfg = load_config(
        RECIPE,
        overrides
        + program
        + [
            "policy.kind=hf",
            f"policy.path={policy_dir}",
            "warm_start.steps=0",
            f"steps={steps}",
            "eval.every=0",
            f"out_dir={out / (label or arm)}",
            f"checkpoint_every={10**6}",
        ],
    )
    trainer = Trainer(cfg)
    rollout_s: list[float] = []
    turns: list[float] = []
    tokens: list[float] = []
    try:
        for step in range(1, steps + 1):
            m = trainer.train_step()
            trainer.step = step
            rollout_s.append(m["perf/rollout_s"])
            turns.append(m["train/turns"])
            tokens.append(m["train/response_tokens"])
            print(
                f"  {arm:8} step {step:4d}  reward {m['train/reward']:.3f}  rollout {m['perf/rollout_s']:.2f} s",
                flush=True,
            )
        own = trainer.evaluate(episodes) if episodes else None  # the program arm: through the program
        engine = (
            evaluate(
                cfg.env.id,
                cfg.env.kwargs,
                trainer.generator,
                split="test",
                episodes=episodes,
                seed=cfg.seed,
                sampling=SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens),
                max_total_tokens=cfg.rollout.max_total_tokens,
            )
            if episodes
            else None
        )
    finally:
        trainer.close()
    row = {
        "arm": label or arm,
        "steps": steps,
        "samples": steps * cfg.rollout.tasks_per_step * cfg.rollout.group_size,
        "rollout_s_per_step": sum(rollout_s) / max(len(rollout_s), 1),
        "turns_per_trajectory": sum(turns) / max(len(turns), 1),
        "policy_tokens_per_trajectory": sum(tokens) / max(len(tokens), 1),
    }
    if own is not None and engine is not None:  # --episodes 0: the per-step overhead alone
        row.update(
            accuracy=own.mean,
            ci=[own.ci_low, own.ci_high],
            accuracy_engine_eval=engine.mean,
            ci_engine_eval=[engine.ci_low, engine.ci_high],
        )
    return row


def earlier_rows(path: Path, settings: dict) -> dict[str, dict]:
    """The rows an earlier run left in `path`, by arm, when it ran with the same `settings`."""
    if not path.is_file():
        return {}
    earlier = json.loads(path.read_text())
    if any(earlier.get(k) != v for k, v in settings.items()):
        return {}
    rows = [earlier["before"]] if "before" in earlier else []
    return {r["arm"]: r for r in rows + earlier.get("results", [])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument(
        "--episodes", type=int, default=200, help="held-out tasks (0: no evaluation, the overhead alone)"
    )
    ap.add_argument("--out", default="runs/bench_program")
    ap.add_argument("--tasks-per-step", type=int, default=0, help="tasks per RL step (0: the recipe's)")
    ap.add_argument("--small", action="store_true", help="tiny sizes for a CPU smoke run")
    ap.add_argument(
        "--arms", default="before,engine,program", help="rows to (re)compute; the others come from --out"
    )
    ap.add_argument(
        "overrides", nargs="*", help="recipe overrides (key=value) for every arm, after --small's"
    )
    args = ap.parse_args()
    out = Path(args.out)
    overrides = list(SMALL if args.small else []) + args.overrides
    if args.tasks_per_step:
        overrides.append(f"rollout.tasks_per_step={args.tasks_per_step}")
    arms = set(args.arms.split(","))
    t0 = time.perf_counter()
    policy_dir = warm_start(out, overrides)
    summary: dict = {"overrides": overrides, "steps": args.steps, "episodes": args.episodes}
    kept = earlier_rows(out / "results.json", summary)
    results: list[dict] = []
    summary["results"] = results
    # a row neither asked for nor kept from an earlier run stays out
    for arm in ("before", "engine", "program"):
        if arm in arms:
            steps = 0 if arm == "before" else args.steps
            label = "program" if arm == "before" else arm
            r = run_arm(label, policy_dir, out, steps, args.episodes, overrides, arm)
        elif arm in kept:
            r = kept[arm]
        else:
            continue
        if arm == "before":
            summary["before"] = r
        else:
            results.append(r)
        (out / "results.json").write_text(json.dumps(summary, indent=2))  # each row kept as it comes
    by_arm = {r["arm"]: r for r in results}
    if {"engine", "program"} <= set(by_arm):
        summary["overhead"] = by_arm["program"]["rollout_s_per_step"] / max(
            by_arm["engine"]["rollout_s_per_step"], 1e-9
        )
    summary["wall_s"] = time.perf_counter() - t0
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    print(
        "\n| arm | samples | accuracy (own eval) | 95% CI | accuracy (engine eval) | rollout s/step "
        "| turns/traj | policy tokens/traj |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in ([summary["before"]] if "before" in summary else []) + results:
        held_out = (
            f"{r['accuracy']:.3f} | [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | {r['accuracy_engine_eval']:.3f}"
            if "accuracy" in r
            else "— | — | —"
        )
        print(
            f"| {r['arm']} | {r['samples']} | {held_out} | {r['rollout_s_per_step']:.2f} | "
            f"{r['turns_per_trajectory']:.2f} | {r['policy_tokens_per_trajectory']:.1f} |"
        )
    if "overhead" in summary:
        print(f"\nprogram rollout time / engine rollout time per step: {summary['overhead']:.2f}x")


if __name__ == "__main__":
    main()
