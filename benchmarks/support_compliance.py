"""Support-v0: GRPO on the outcome alone vs the outcome plus per-turn compliance rewards, 3 seeds (issue 46).

Does rewarding each policy violation on the turn that made it (τ-bench's retail policy, arXiv 2406.12045:
identity before any account action, an explicit yes before each change) lower the violations a policy
makes per episode, and at what cost in success? One shared warm start (supervised on the env's oracle
conversations: the recipe's ``warm_start`` section), then arms, each a child process of its own (a clean
heap), all with the same steps, tasks per step, group size and seeds:

- ``before``: the warm start itself;
- ``outcome-S``: GRPO with ``env.kwargs.compliance_weight=0`` (violations counted in the verdict, not
  rewarded);
- ``compliance-S``: the per-turn compliance parts on (−``compliance_weight`` per unconfirmed write,
  unverified account action, tool error: the recipe's 0.1) with ``algorithm.advantage=returns``, so a
  penalty is credited to the turn that made it and those before, not spread over the episode;
- ``outcome_returns-S`` (``--kinds outcome,compliance,outcome_returns``): the outcome alone under the same
  ``returns`` estimator, which separates the reward's effect from the estimator's;

for each seed S of ``--seeds``. Each arm is then evaluated greedily on the first ``--episodes`` test tasks,
with the same env settings for every arm (the recipe's: success does not depend on the weight): success
with its 95% Wilson interval (`argym.stats`), violations per episode by kind (``unconfirmed_write``,
``unverified_action``, ``tool_error``: the last verdict's ``violations``, counted at any weight), the
paired difference to ``before`` on the same tasks and, per seed, ``compliance-S`` − ``outcome-S`` (success
and violations per episode, mean with a 95% normal interval over the tasks). Training reports
``train/varied_groups`` per arm (the share of a step's groups whose rewards differ): an arm at 0 on every
step learned nothing from its reward, and its row says so (``"flat": true``) and the table warns.

Rows go to ``--out``/rows.jsonl as each arm ends; a rerun with the same settings skips the arms already
there (resumable; ``--arms`` reruns some). The summary is ``--out``/results.json.

    .venv/bin/python benchmarks/support_compliance.py                    # the measurement (hours on a CPU)
    .venv/bin/python benchmarks/support_compliance.py --policy smollm2   # SmolLM2-135M-Instruct instead
    .venv/bin/python benchmarks/support_compliance.py --small            # the whole script at tiny sizes
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

from _arms import StepLog, add_arm_arguments, append_row, from_warm, load, run_arms

from argym.envs.support.grader import PARTS

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "grpo_support.yaml"
CHECKPOINT_EVERY = 5
"""RL steps between an arm's checkpoints: a killed arm resumes from the last (run_arms, resumable)."""
KINDS = {  # each arm kind's overrides on top of the recipe
    "outcome": ["env.kwargs.compliance_weight=0.0"],
    "compliance": ["algorithm.advantage=returns"],  # the recipe's compliance_weight (0.1)
    "outcome_returns": ["env.kwargs.compliance_weight=0.0", "algorithm.advantage=returns"],
}
SMOLLM2 = [  # first settings (the ToolCall recipe's, configs/grpo_smollm2_toolcall.yaml), not tuned for
    # Support: check that `before` leaves room both ways (success well inside (0, 1)) before the full run
    "policy.kind=hf",
    "policy.path=smollm2",
    "policy.dtype=float32",
    "warm_start.steps=8",
    "warm_start.tasks=240",
    "warm_start.batch_size=8",
    "warm_start.lr=5e-5",
    "algorithm.lr=3e-5",
    "rollout.max_new_tokens=96",  # BPE: a call or a message to the customer fits in 96
    "rollout.max_total_tokens=3072",
    "algorithm.micro_batch_size=8",
]
SMALL = [  # the tiny policy, a few short steps: the script end to end in minutes on 2 cores
    "policy.kind=tiny",
    "policy.tiny.hidden_size=64",
    "policy.tiny.num_layers=1",
    "policy.tiny.num_heads=2",
    "policy.tiny.intermediate_size=128",
    "warm_start.steps=2",
    "warm_start.tasks=16",
    "warm_start.batch_size=8",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=32",
    "env.kwargs.max_turns=3",
    "algorithm.micro_batch_size=4",
]


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warm_key(a: argparse.Namespace) -> str:
    """What the warm start depends on: the resolved config every arm starts from."""
    from dataclasses import asdict

    return digest(asdict(load(a)))


def settings_key(a: argparse.Namespace) -> str:
    """What makes rows comparable: the resolved config and the budget. A rerun with another key starts afresh."""
    return digest({"config": warm_key(a), "steps": a.steps, "episodes": a.episodes})


# ---- evaluation (one path for every arm) ----------------------------------------------------------------------


def violations_of(verdict: Any) -> dict[str, int]:
    """The episode's violations by kind from its last verdict (`verdict["violations"]`, running counts). A
    verdict too long for the transcript is kept as cut JSON text with sorted keys (`argym.transcript`):
    ``violations`` is then near its end, in the kept tail. No verdict: the episode ended (its token budget)
    before the env ran a turn, so nothing was called."""
    if verdict is None:
        return dict.fromkeys(PARTS, 0)
    if isinstance(verdict, dict):
        found = verdict.get("violations")
    else:
        m = re.search(r'"violations": (\{[^{}]*\})', str(verdict))
        found = json.loads(m.group(1)) if m else None
    if not isinstance(found, dict):
        raise ValueError(f"a Support-v0 verdict without its violations count: {str(verdict)[:200]}")
    return {k: int(found[k]) for k in PARTS}


def held_out(cfg: Any, model: Any, tokenizer: Any, episodes: int) -> dict[str, Any]:
    """Greedy success on the first `episodes` test tasks with its Wilson interval, violations per episode by
    kind, and per task both (for the paired differences)."""
    from argym.agents.evaluate import evaluate
    from argym.agents.hf import HFPolicy
    from argym.agents.policy import SamplingParams
    from argym.stats import wilson_interval

    was_training = model.training
    model.eval()
    r = evaluate(
        cfg.env.id,
        cfg.env.kwargs,
        HFPolicy(model, tokenizer, name="eval"),
        agent_spec="hf:arm",
        split="test",
        episodes=episodes,
        seed=0,
        sampling=SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens),
        max_total_tokens=cfg.rollout.max_total_tokens,
    )
    model.train(was_training)
    scored = [e for e in r.episodes if not e["infra_failure"]]
    per_task = {
        e["task_id"]: {"success": float(e["success"]), **violations_of(e["transcript"]["verdict"])}
        for e in scored
    }
    n, wins = len(scored), sum(e["success"] for e in scored)
    low, high = wilson_interval(wins, n)
    per_kind = {k: statistics.fmean(t[k] for t in per_task.values()) for k in PARTS}
    return {
        "success": wins / n,
        "ci": [low, high],
        "n": n,
        "infra_failures": r.infra_failures,
        "violations": per_kind,
        "violations_total": sum(per_kind.values()),
        "turns": statistics.fmean(e["turns"] for e in scored),
        "per_task": per_task,
    }


# ---- the arms ---------------------------------------------------------------------------------------------------


def warm_start(a: argparse.Namespace, out: Path) -> Path:
    """The shared starting checkpoint, trained once per resolved config (a different --small or override
    trains its own); one already in `out` is reused."""
    from argym.algorithms.trainer import Trainer

    policy = out / f"warm-{warm_key(a)}" / "checkpoint" / "policy"
    if not policy.is_dir():
        Trainer(load(a, ["steps=0", f"out_dir={policy.parents[1]}"])).close()
    return policy


def run_before(a: argparse.Namespace, policy_dir: Path) -> dict[str, Any]:
    import torch

    from argym.agents.hf import HFPolicy

    cfg = load(a, from_warm(policy_dir))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    p = HFPolicy.load(policy_dir, dtype=cfg.policy.dtype, device=device)
    return {"steps": [], "train_s": 0.0, "eval": held_out(cfg, p.model, p.tokenizer, a.episodes)}


def varied_summary(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """`train/varied_groups` over the arm's steps; ``flat`` when it was 0 on every step (nothing learned)."""
    v = [s["varied_groups"] for s in steps]
    if not v:
        return {"mean": None, "first5": None, "last5": None, "flat": None}
    return {
        "mean": statistics.fmean(v),
        "first5": statistics.fmean(v[:5]),
        "last5": statistics.fmean(v[-5:]),
        "flat": max(v) == 0.0,
    }


def run_rl(a: argparse.Namespace, out: Path, policy_dir: Path, kind: str, seed: int) -> dict[str, Any]:
    import torch

    from argym.algorithms.trainer import Trainer

    torch.manual_seed(seed)
    arm = f"{kind}-{seed}"
    cfg = load(
        a,
        [
            *from_warm(policy_dir),
            *KINDS[kind],
            f"seed={seed}",
            f"steps={a.steps}",
            "eval.every=0",
            f"out_dir={out / arm}",
        ],
    )
    trainer = Trainer(cfg)  # resumes from the arm's last checkpoint where a killed run left one
    log = StepLog(out / arm)
    steps = log.resumed(trainer.step)
    t0 = time.perf_counter() - (steps[-1]["train_s"] if steps else 0.0)
    try:
        while trainer.step < a.steps:
            m = trainer.train_step()
            trainer.step += 1
            row = {
                "step": trainer.step,
                "success": m["train/success"],
                "reward": m["train/reward"],
                "varied_groups": m.get("train/varied_groups", 0.0),  # absent: every sample an infra failure
                "turns": m["train/turns"],
                "rollout_s": m["perf/rollout_s"],
                "update_s": m["perf/update_s"],
                "train_s": time.perf_counter() - t0,  # since the arm began, across resumes
            }
            if trainer.step % CHECKPOINT_EVERY == 0 or trainer.step == a.steps:
                trainer.save()  # a resumed arm drops the rows of steps after its checkpoint (StepLog.resumed)
            steps.append(row)
            log.append(row)
            print(
                f"  {arm} step {row['step']}: success {row['success']:.3f}  reward {row['reward']:+.3f}  "
                f"varied groups {row['varied_groups']:.2f}  ({row['rollout_s']:.0f} s + {row['update_s']:.0f} s)",
                flush=True,
            )
        train_s = time.perf_counter() - t0
        result = held_out(load(a), trainer.policy.model, trainer.policy.tokenizer, a.episodes)
    finally:
        trainer.close()
    return {"steps": steps, "train_s": train_s, "varied_groups": varied_summary(steps), "eval": result}


# ---- the report -------------------------------------------------------------------------------------------------


def paired_arms(after: dict[str, dict[str, float]], before: dict[str, dict[str, float]]) -> dict[str, Any]:
    """after − before on the tasks both evaluated: success, violations per episode (all kinds and each)."""
    from _agentic_report import paired

    def col(per_task: dict[str, dict[str, float]], key: str) -> dict[str, float]:
        return {t: (sum(v[k] for k in PARTS) if key == "total" else v[key]) for t, v in per_task.items()}

    return {key: paired(col(after, key), col(before, key)) for key in ("success", "total", *PARTS)}


def summarize(rows: dict[str, dict[str, Any]], kinds: list[str], seeds: list[str]) -> dict[str, Any]:
    arms: dict[str, Any] = {}
    before = rows.get("before", {}).get("eval", {}).get("per_task")
    for arm, row in rows.items():
        e = row["eval"]
        arms[arm] = {k: v for k, v in e.items() if k != "per_task"} | {
            "train_s": row["train_s"],
            "varied_groups": row.get("varied_groups"),
        }
        if before is not None and arm != "before":
            arms[arm]["vs_before"] = paired_arms(e["per_task"], before)
    vs_outcome = {  # each other kind − outcome, per seed, paired on the same tasks
        kind: {
            s: paired_arms(rows[f"{kind}-{s}"]["eval"]["per_task"], rows[f"outcome-{s}"]["eval"]["per_task"])
            for s in seeds
            if f"{kind}-{s}" in rows and f"outcome-{s}" in rows
        }
        for kind in kinds
        if kind != "outcome"
    }
    over_seeds = {}
    for kind in kinds:
        runs = [rows[f"{kind}-{s}"]["eval"] for s in seeds if f"{kind}-{s}" in rows]
        if runs:
            over_seeds[kind] = {
                key: {
                    "mean": statistics.fmean(r[key] for r in runs),
                    "min": min(r[key] for r in runs),
                    "max": max(r[key] for r in runs),
                }
                for key in ("success", "violations_total")
            } | {"n": len(runs)}
        if vs_outcome.get(kind):
            over_seeds[kind]["minus_outcome"] = {
                key: statistics.fmean(d[key]["mean"] for d in vs_outcome[kind].values())
                for key in ("success", "total")
            }
    return {
        "arms": arms,
        "minus_outcome_per_seed": vs_outcome,
        "over_seeds": over_seeds,
        "flat_arms": [a for a, r in arms.items() if (r["varied_groups"] or {}).get("flat")],
    }


def print_table(s: dict[str, Any]) -> None:
    print(
        "\n| arm | success | 95% Wilson | "
        + " | ".join(PARTS)
        + " | violations/episode | vs before: success, "
        "violations (paired) | varied groups (first 5 → last 5) |"
    )
    print("| --- " * (6 + len(PARTS)) + "|")
    for arm, r in s["arms"].items():
        vs = r.get("vs_before")
        diff = (
            f"{vs['success']['mean']:+.3f} [{vs['success']['ci'][0]:+.3f}, {vs['success']['ci'][1]:+.3f}], "
            f"{vs['total']['mean']:+.2f} [{vs['total']['ci'][0]:+.2f}, {vs['total']['ci'][1]:+.2f}]"
            if vs
            else "—"
        )
        vg = r["varied_groups"]
        varied = (
            f"{vg['first5']:.2f} → {vg['last5']:.2f}" + (" FLAT: nothing learned" if vg["flat"] else "")
            if vg and vg["mean"] is not None
            else "—"
        )
        kinds = " | ".join(f"{r['violations'][k]:.2f}" for k in PARTS)
        print(
            f"| {arm} | {r['success']:.3f} | [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | {kinds} | "
            f"{r['violations_total']:.2f} | {diff} | {varied} |"
        )
    for kind, per_seed in s["minus_outcome_per_seed"].items():
        print(f"\n{kind} − outcome, paired on the same tasks (95% normal interval over the tasks):")
        for seed, d in per_seed.items():
            print(
                f"- seed {seed}: success {d['success']['mean']:+.3f} [{d['success']['ci'][0]:+.3f}, "
                f"{d['success']['ci'][1]:+.3f}], violations/episode {d['total']['mean']:+.2f} "
                f"[{d['total']['ci'][0]:+.2f}, {d['total']['ci'][1]:+.2f}]"
            )
    print(f"over seeds: {json.dumps(s['over_seeds'])}")
    for arm in s["flat_arms"]:
        print(f"warning: {arm}'s groups were flat on every step (train/varied_groups 0): it learned nothing.")


# ---- driver -----------------------------------------------------------------------------------------------------


def child(a: argparse.Namespace) -> None:
    out = Path(a.out)
    policy_dir = warm_start(a, out)  # made by the parent before any arm: here only found
    if a.child == "before":
        row = run_before(a, policy_dir)
    else:
        kind, seed = a.child.rsplit("-", 1)
        row = run_rl(a, out, policy_dir, kind, int(seed))
    append_row(out, a.child, settings_key(a), row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default=str(RECIPE))
    ap.add_argument(
        "--policy", choices=("tiny", "smollm2"), default="tiny", help="the recipe's tiny model or SmolLM2"
    )
    ap.add_argument("--steps", type=int, default=100, help="RL steps of each arm (the recipe's 100)")
    ap.add_argument(
        "--episodes", type=int, default=100, help="held-out test tasks per evaluation (the test split)"
    )
    ap.add_argument("--seeds", default="0,1,2", help="RL seeds, one shared warm start")
    ap.add_argument("--kinds", default="outcome,compliance", help=f"arm kinds, of {sorted(KINDS)}")
    add_arm_arguments(ap, "runs/support_compliance", "before,compliance-1")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    if set(kinds) - set(KINDS):
        ap.error(f"unknown --kinds {sorted(set(kinds) - set(KINDS))}; known: {sorted(KINDS)}")
    if a.child:
        return child(a)
    if a.policy == "smollm2":
        a.overrides = [*SMOLLM2, *a.overrides]
    if a.small:
        a.overrides = [*SMALL, *a.overrides]
        a.steps, a.episodes = min(a.steps, 2), min(a.episodes, 4)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    warm_start(a, out)  # once, before any arm
    print(f"warm start: {time.perf_counter() - t0:.0f} s", flush=True)
    seeds = [s for s in a.seeds.split(",") if s]
    arms = ["before", *(f"{k}-{s}" for s in seeds for k in kinds)]  # by seed: a seed's pair ends together
    key = settings_key(a)
    argv = [f"--recipe={a.recipe}", f"--steps={a.steps}", f"--episodes={a.episodes}", f"--out={a.out}"]
    rows = run_arms(__file__, a, arms, key, argv, resumable=True)
    summary = summarize({arm: rows[arm] for arm in arms if arm in rows}, kinds, seeds)
    settings = {k: v for k, v in vars(a).items() if k != "child"} | {"key": key}
    (out / "results.json").write_text(
        json.dumps({"settings": settings, "summary": summary, "rows": rows}, indent=2)
    )
    print_table(summary)
    print(f"wrote {out / 'results.json'}")


if __name__ == "__main__":
    main()
