"""Can VAPO's critic learn a value here? Explained variance during value pretraining, 1 vs 2 attempts.

VAPO's defining part is its value model (arXiv 2504.05118 §3.1: pretrained on the
initial policy's returns before any policy update). On single-attempt two-digit
addition (`benchmarks/algorithms.py`) its explained variance stayed at 0.00: the
return is whether the written sum is right, and predicting that from a prefix is
the skill the policy is still learning. With two attempts the env's verdict is in
the context of every second-attempt token ("incorrect, try again"), so the value of
a prefix depends on something the critic can read.

For each seed the tiny policy starts from `--warm`'s warm start (the presets
benchmark's, `runs/bench_alg_s{seed}/warm-seed{seed}`), the critic is built as VAPO
builds it (the policy's body, a fresh zero head, lr `value_lr_scale` × the actor's)
and pretrained for `--steps` rollout batches (32 tasks × 8 samples, temperature 1),
as the trainer's value pretraining does, once with `max_attempts=1` and once with
`max_attempts=2`. Each step's explained variance 1 − Var(R − V)/Var(R) is of the
values *before* that step's update (the critic has not seen those returns).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vapo_critic.py --seeds 0,1,2 --steps 12

Prints one row per setting (mean EV of the last `--tail` steps per seed, their mean, and
the share of the returns' variance that the task alone explains, from each batch's
groups: the most a critic reading only the prompt could reach at the first token) and
writes `--out` (every step's figures).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def prompt_share(trajs: list) -> float:
    """The share of the returns' variance that the task alone explains (a one-way ANOVA estimate over
    groups: between-group variance less its sampling part, over the total). A critic that reads only the
    prompt can explain at most this much at an episode's first token; the rest needs what was written."""
    groups: dict[int, list[float]] = {}
    for t in trajs:
        groups.setdefault(t.group, []).append(float(t.reward))
    values = [r for g in groups.values() for r in g]
    total = statistics.pvariance(values)
    if total == 0:
        return 0.0
    n = statistics.fmean(len(g) for g in groups.values())
    between = statistics.pvariance([statistics.fmean(g) for g in groups.values()])
    within = statistics.fmean(statistics.pvariance(g) for g in groups.values())
    return (between - within / (n - 1)) / total


def pretrain(seed: int, attempts: int, steps: int, warm: str, out: Path) -> list[dict[str, float]]:
    import torch
    from rich.console import Console

    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    policy = Path(warm.format(seed=seed)) / f"warm-seed{seed}" / "checkpoint" / "policy"
    cfg = load_config(
        None,
        [
            "algo=vapo",
            "policy.kind=hf",
            f"policy.path={policy}",
            "warm_start.steps=0",
            f"env.kwargs.max_attempts={attempts}",
            "algorithm.value_pretrain_steps=0",  # done below, one step at a time, to record each
            "steps=0",
            f"seed={seed}",
            f"out_dir={out / f'seed{seed}-attempts{attempts}'}",
            f"checkpoint_every={10**6}",
        ],
    )
    trainer = Trainer(cfg, Console(quiet=True))
    critic, rows = trainer.learner.critic, []
    assert critic is not None
    t0 = time.perf_counter()
    try:
        for k in range(steps):  # as Trainer._pretrain_value, recording every step
            trajs, _ = trainer.collect(step=k, purpose="value_pretrain")
            batch = trainer.learner.prepare_batch(
                trajs, trainer.policy.pad_id, advantages=torch.zeros(len(trajs)), old_logprobs=False
            )
            m = critic.update(batch, trainer.learner.value_targets(batch))
            rows.append(
                {
                    "step": k + 1,
                    "explained_var": m["value/explained_var"],
                    "value_loss": m["value/loss"],
                    "success": sum(t.success for t in trajs) / len(trajs),
                    "turns": sum(t.turns for t in trajs) / len(trajs),
                    "prompt_share": prompt_share(trajs),
                }
            )
            print(
                f"seed {seed} attempts {attempts} step {k + 1:3d}  EV {m['value/explained_var']:+.3f}  "
                f"value loss {m['value/loss']:.4f}  success {rows[-1]['success']:.2f}  "
                f"prompt share {rows[-1]['prompt_share']:+.3f}  {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
    finally:
        trainer.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=12, help="value-pretraining steps per run")
    ap.add_argument("--tail", type=int, default=5, help="steps at the end averaged per run")
    ap.add_argument("--warm", default="runs/bench_alg_s{seed}", help="DIR holding warm-seedN ({seed}: N)")
    ap.add_argument("--out", type=Path, default=Path("runs/vapo_critic"))
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    runs = {
        (attempts, seed): pretrain(seed, attempts, a.steps, a.warm, a.out)
        for attempts in (1, 2)
        for seed in seeds
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "results.json").write_text(
        json.dumps([{"attempts": k[0], "seed": k[1], "steps": v} for k, v in runs.items()], indent=2)
    )
    print(
        f"\n| max_attempts | seeds | EV, mean of the last {a.tail} steps: per seed | mean | value loss "
        "| task's share of Var(R) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for attempts in (1, 2):
        tails = [[r["explained_var"] for r in runs[attempts, s][-a.tail :]] for s in seeds]
        per_seed = [statistics.fmean(t) for t in tails]
        loss = statistics.fmean(r["value_loss"] for s in seeds for r in runs[attempts, s][-a.tail :])
        share = statistics.fmean(r["prompt_share"] for s in seeds for r in runs[attempts, s])
        print(
            f"| {attempts} | {len(seeds)} | {', '.join(f'{x:+.3f}' for x in per_seed)} | "
            f"{statistics.fmean(per_seed):+.3f} | {loss:.4f} | {share:+.3f} |"
        )


if __name__ == "__main__":
    main()
