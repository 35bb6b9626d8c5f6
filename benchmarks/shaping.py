"""The shaping features beside plain GRPO, from the same warm starts, 3 seeds: does each one help, and why (not)?

Each experiment puts a feature where its mechanism can matter and trains it
beside plain GRPO in the same run, from the quickstart's supervised warm start
of each seed (the one `benchmarks/algorithms.py` trains: ~27% held-out on
two-digit addition, so the outcome reward carries signal), on the same tasks,
with the same seeds and sample budget:

- `sar`: single-turn Math, outcome only vs outcome + 0.2 · SAR (Self-Aligned
  Reward, arXiv 2509.05489 §3). Both arms compute SAR (the GRPO arm at weight 0),
  so both pay its forward and both log how it ranks a group's samples against
  correctness (`reward/sar_success_corr`: what a group-normalised advantage sees).
- `r3l`: Math with three attempts (the env's verdict after each wrong answer),
  GRPO vs R³L (`configs/r3l_math.yaml`, arXiv 2601.03715: retries from the
  pivot, α = 3, OPMD) at the same trajectories per step, retries included; the
  ablation arms split R³L's two changes: `r3l-retries` keeps the retries but
  GRPO's loss and advantage, `r3l-loss` keeps R³L's loss, advantage and
  amplification with ordinary rollouts only.
- `r3l-feedback`: the same from a warm start that acts on feedback (half of its episodes
  answer right after the env's "Incorrect" or after R³L's guidance): R³L's precondition.
- `agentprm`: Math with three attempts, GRPO vs GRPO + AgentPRM step rewards
  (arXiv 2502.10325): per seed a PRM is trained on the warm policy's own
  rollouts and Monte-Carlo branches, and the PRM arm trains fewer RL steps by
  what that data cost, so both arms end at about the same samples.
- `pure`: a gameable PRM (filler steps score 0.9) under sum- vs min-form credit
  (PURE, arXiv 2504.15275), GRPO beside, from a warm start that already pads.
- `label-free`: Math without labels (docs/label_free.md): labelled GRPO vs TTRL's majority vote
  (arXiv 2504.16084) vs Co-rewarding-I (a question labelled by its rephrasing's vote) and -II (an EMA
  teacher's greedy answer, arXiv 2508.00410), at equal samples (the paired arm draws 16 tasks and their
  16 rephrasings). The labelled arm logs the majority vote at weight 0, so every arm reports how often a
  pseudo-label would have been right (`*/label_accuracy`), and the collapse flag.
- `corlhf`: a reward model refit on the policy's samples every 5 steps vs the same model frozen after
  its first fit, at the same label budget (256 verified outcomes), labelled GRPO beside.
- `decomposer`: `argym/DecomposeReasoner-v0` on word problems with known
  intermediates: sparse (λ = 0) vs dense min-form vs dense mean-form step reward,
  from the recipe's full warm start (33 min here), trained once and shared by the
  seeds with `--warm runs/shaping/decomposer_warm --warm-seed 0`.

Every arm records its mechanism's metrics per step (`logged` prefixes below).
Results per run go to `<out>/results.json` (one process per seed, then
`--merge`), the plot and merged table to `benchmarks/results/shaping_<experiment>*`.

    .venv/bin/python benchmarks/shaping.py sar --seeds 0 --out runs/shaping/sar_s0 [--warm DIR] [key=value ...]
    .venv/bin/python benchmarks/shaping.py sar --merge runs/shaping/sar_s0 runs/shaping/sar_s1 ...
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from algorithms import plot, run_preset, summarise, t_half, warm_start

REPO = Path(__file__).resolve().parents[1]
R3L = str(REPO / "configs" / "r3l_math.yaml")
DECOMPOSER = str(REPO / "configs" / "decomposer_verified.yaml")
CORLHF = str(REPO / "configs" / "corlhf_math.yaml")
# no label reaches a label-free arm's update: the outcome is logged (weight 0), the pseudo-label trains
LABEL_FREE = ("reward.weights.outcome=0.0",)
# PURE (arXiv 2504.15275 §5): the filler-loving PRM of benchmarks/process_rewards.py (registered when
# the filler warm start imports it) scores filler steps 0.9 and the answer ±1; answers up to 80 tokens
PURE_COMMON = (
    "rollout.tasks_per_step=16",
    "rollout.max_new_tokens=80",
    "reward.weights.outcome=1.0",
    "reward.prm=filler_loving",
)


@dataclass(frozen=True)
class Arm:
    name: str
    recipe: str | None  # None: the quickstart recipe
    overrides: tuple[str, ...] = ()
    prepared: bool = False  # uses the experiment's `prepare` output, and is charged its samples


@dataclass(frozen=True)
class Experiment:
    title: str
    env: tuple[str, ...]  # overrides for every arm
    arms: tuple[Arm, ...]
    logged: tuple[str, ...]  # metric prefixes kept per step
    # (warm policy dir, folder, seed) → overrides for the prepared arms, samples it cost, a report to keep
    prepare: Callable[[Path, Path, int], tuple[list[str], int, dict]] | None = None
    # every arm's recipe (an arm's own wins); None: the quickstart's
    recipe: str | None = None
    # (folder, seed, overrides) → the warm policy dir, trained per seed when the quickstart's will not do
    own_warm_start: Callable[[Path, int, list[str]], Path] | None = None
    plotted: str | None = None  # the mechanism's metric drawn beside the accuracy curves


def decomposer_warm_start(out: Path, seed: int, overrides: list[str]) -> Path:
    """The recipe's warm start (400 × 64) on the oracle decomposition (the task's own intermediate steps).

    A quarter of it (200 × 32) taught the tiny model the decomposition's shape but not to copy the
    problem's numbers into it: every sub-question was rejected, so the dense reward was as flat as the
    outcome (0 on every sample)."""
    policy_dir = out / f"warm-seed{seed}" / "checkpoint" / "policy"
    if policy_dir.is_dir():  # the trainer's checkpoints appear whole (written, then renamed)
        return policy_dir
    return warm_start(out, seed, overrides, recipe=DECOMPOSER)


def filler_warm_start(out: Path, seed: int, overrides: list[str]) -> Path:
    """Oracle answers of which half open with one or two filler steps, so RL can amplify padding (PURE)."""
    from process_rewards import filler_warm_start as train

    return train(out / f"warm-seed{seed}", steps=400, seed=seed)


def feedback_warm_start(out: Path, seed: int, overrides: list[str], steps: int = 800) -> Path:
    """The quickstart's warm start, but on episodes where acting on feedback is part of the task.

    Half are the quickstart's (the question, the right answer); a quarter answer wrong first, get
    the env's "Incorrect, try again" and then answer right; a quarter see R³L's rule guidance for a
    wrong answer (the exact message the reflector writes, from the env's real verdict) and answer
    right. Only the right answers are trained on. This is the precondition R³L assumes (a policy
    that can read what went wrong) and that the quickstart's warm start lacks. Twice the quickstart's
    episodes and steps, so that the plain half gets as many updates as the quickstart's whole.
    """
    import numpy as np
    from process_rewards import save_whole

    import argym
    from argym.agents.hf import HFPolicy
    from argym.agents.renderer import conversation_ids
    from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
    from argym.algorithms.r3l.reflection import RuleReflector
    from argym.algorithms.sft import warm_start as sft
    from argym.types import Trajectory

    path = out / f"warm-seed{seed}" / "checkpoint" / "policy"
    if path.is_dir():  # saved whole (save_whole)
        return path
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=seed), tok, name="tiny")
    rng = np.random.default_rng(seed + 1)
    env = argym.make("argym/Math-v0", tasks="arithmetic(digits=2,ops=+,terms=2)", max_attempts=3)
    seqs = []
    try:
        for _ in range(4000):
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
            answer = int(env.unwrapped.task.answer)
            right = {"role": "assistant", "content": f"\\boxed{{{answer}}}"}
            kind = int(rng.choice(3, p=[0.5, 0.25, 0.25]))
            if kind == 0:
                messages = [*obs, right]
            else:
                wrong = answer + int(rng.choice([-1, 1])) * int(rng.integers(1, 20))
                after, _, _, _, info = env.step(f"\\boxed{{{wrong}}}")
                if kind == 1:
                    messages = [*after, right]
                else:
                    failed = Trajectory("t", after, 0.0, False, 1, False, False, infos=[info])
                    hint = RuleReflector().reflect([failed])[0].guidance
                    messages = [*obs, {"role": "user", "content": hint}, right]
            ids, mask = conversation_ids(policy.renderer, messages)
            last = len(ids) - len(policy.renderer.assistant_ids(right))
            seqs.append((ids, [0] * last + mask[last:]))  # the wrong answer is context, not a target
    finally:
        env.close()
    losses = sft(policy, seqs, steps, batch_size=64, lr=2e-3, seed=seed + 2)
    print(f"feedback warm start: {steps} steps, loss {losses[0]:.3f} → {losses[-1]:.3f}", flush=True)
    save_whole(policy, path)
    return path


def agent_prm(policy_dir: Path, out: Path, seed: int) -> tuple[list[str], int, dict]:
    """AgentPRM's PRM from the warm policy's own rollouts and branches; its step rewards for the arm."""
    from process_rewards import train_agent_prm

    prm_dir, samples, report = train_agent_prm(policy_dir, out, prm_tasks=32, seed=seed)
    overrides = ["algorithm.advantage=returns", "reward.weights.process=0.5", f"reward.prm=hf:{prm_dir}"]
    return overrides + ["reward.credit=min"], samples, report


EXPERIMENTS = {
    "sar": Experiment(
        "GRPO vs GRPO + 0.2·SAR, Math-v0 one attempt, tiny policy, same warm start per seed",
        (),
        (
            Arm("grpo", None, ("reward.weights.sar=0.0",)),
            Arm("grpo+sar", None, ("reward.weights.sar=0.2",)),
            # ablation: without the group std, a group whose outcomes are all equal keeps SAR's small
            # spread small instead of scaling it to unit size (Dr.GRPO's point, arXiv 2503.20783 §3.1)
            Arm("grpo-nostd", None, ("reward.weights.sar=0.0", "algorithm.adv_std=false")),
            Arm("grpo+sar-nostd", None, ("reward.weights.sar=0.2", "algorithm.adv_std=false")),
        ),
        ("reward/sar", "train/response_tokens", "train/success"),
        plotted="reward/sar_success_corr",
    ),
    "r3l": Experiment(
        "GRPO vs R³L, Math-v0 three attempts, tiny policy, same warm start per seed",
        ("env.kwargs.max_attempts=3",),
        (
            Arm("grpo", None),
            Arm("r3l", R3L),
            Arm(
                "r3l-retries",
                R3L,
                ("algorithm.policy_loss=ppo_clip", "algorithm.adv_std=true", "algorithm.amplify_alpha=null"),
            ),
            Arm("r3l-loss", R3L, ("rollout.strategy=plain",)),
        ),
        ("r3l/", "train/success", "train/turns"),
        plotted="r3l/retry_success",
    ),
    "r3l-feedback": Experiment(
        "GRPO vs R³L from a warm start that acts on feedback, Math-v0 three attempts, tiny policy",
        ("env.kwargs.max_attempts=3",),
        (Arm("grpo", None), Arm("r3l", R3L), Arm("r3l-loss", R3L, ("rollout.strategy=plain",))),
        ("r3l/", "train/success", "train/turns"),
        plotted="r3l/retry_success",
        own_warm_start=feedback_warm_start,
    ),
    "agentprm": Experiment(
        "GRPO vs GRPO + AgentPRM step rewards (PRM data charged), Math-v0 three attempts, same warm start per seed",
        ("env.kwargs.max_attempts=3",),
        (Arm("grpo", None), Arm("grpo+agentprm", None, prepared=True)),
        ("reward/process", "train/success", "train/turns"),
        plotted="reward/process_success_corr",
        prepare=agent_prm,
    ),
    "pure": Experiment(
        "GRPO vs PURE sum- and min-form credit of a gameable PRM, Math-v0, filler warm start per seed",
        PURE_COMMON,
        (
            Arm("grpo", None, ("reward.weights.process=0.0",)),  # the PRM logged, not trained on
            Arm(
                "sum",
                None,
                ("reward.weights.process=1.0", "reward.credit=sum", "algorithm.advantage=returns"),
            ),
            Arm(
                "min",
                None,
                ("reward.weights.process=1.0", "reward.credit=min", "algorithm.advantage=returns"),
            ),
        ),
        ("reward/process", "train/response_tokens", "train/success"),
        plotted="train/response_tokens",
        own_warm_start=filler_warm_start,
    ),
    "label-free": Experiment(
        "Math without labels: labelled GRPO vs majority vote vs Co-rewarding I and II, same warm start per seed",
        (),
        (
            Arm("grpo", None, ("reward.weights.majority=0.0",)),
            Arm("majority", None, (*LABEL_FREE, "reward.weights.majority=1.0")),
            Arm(
                "co-data",
                None,
                (
                    *LABEL_FREE,
                    "reward.weights.co_reward_data=1.0",
                    "rollout.strategy=paired",
                    "rollout.tasks_per_step=16",  # 16 tasks + their 16 rephrasings: the others' 32 groups
                ),
            ),
            Arm("co-teacher", None, (*LABEL_FREE, "reward.weights.co_reward_teacher=1.0")),
        ),
        ("majority/", "co_reward_data/", "co_reward_teacher/", "train/success", "train/entropy"),
        plotted="*/label_accuracy",
    ),
    "corlhf": Experiment(
        "A reward model refit on the policy's samples vs frozen after its first fit (256 labels each), Math",
        (),
        (
            Arm("grpo", None, ("reward.weights.outcome=1.0", "reward.weights.reward_model=0.0")),
            Arm("co-trained", None, ("reward.reward_model.refit_every=5",)),
            Arm("frozen", None, ("reward.reward_model.refit_every=0",)),
        ),
        ("reward_model/", "train/success"),
        plotted="reward_model/accuracy",
        recipe=CORLHF,
    ),
    "decomposer": Experiment(
        "Sparse vs dense (verified Decomposer–Reasoner) reward, min- and mean-form, word problems (numbers ≤ 8)",
        # numbers up to 8: 500 distinct test problems, and products the tiny model can hold (≤ 64)
        ("env.kwargs.tasks=word_problems(max_number=8)",),
        (
            Arm("sparse", None, ("env.kwargs.lam=0.0",)),
            Arm("dense-min", None, ("env.kwargs.lam=0.5",)),
            # T → ∞ turns PURE's soft min into the mean: partial credit for a partly right decomposition
            Arm("dense-mean", None, ("env.kwargs.lam=0.5", "env.kwargs.temperature=1000")),
        ),
        ("env/", "train/success", "train/turns"),
        plotted="env/process_coverage",
        recipe=DECOMPOSER,
        own_warm_start=decomposer_warm_start,
    ),
}


def run(
    exp: Experiment, arms: list[Arm], seeds: list[int], warm: str | None, out: Path, a, overrides: list[str]
) -> list[dict]:
    from argym.algorithms.config import load_config

    results = []
    for seed in seeds:
        policy_dir = (
            Path(warm.format(seed=seed)) / f"warm-seed{seed}" / "checkpoint" / "policy" if warm else None
        )
        if exp.own_warm_start:
            # one warm start for every seed (`--warm-seed`): the seeds then differ in RL only
            home, w = (
                (out, seed) if a.warm_seed is None else (Path(warm.format(seed=a.warm_seed)), a.warm_seed)
            )
            policy_dir = exp.own_warm_start(home, w, list(exp.env) + overrides)
        elif (
            policy_dir is None or not policy_dir.exists()
        ):  # a fresh clone: train the quickstart's warm start
            policy_dir = warm_start(out, seed, overrides)
        prepared = None
        if exp.prepare and any(arm.prepared for arm in arms):
            prepared = exp.prepare(policy_dir, out / f"prepare-seed{seed}", seed)
        for arm in arms:
            extra, charged, steps = list(arm.overrides), 0, a.steps
            if arm.prepared and prepared:
                extra += prepared[0]
                charged = prepared[1]
                # the same samples as the other arms in all: fewer RL steps by what the preparation cost
                rollout = load_config(exp.recipe, list(exp.env) + overrides).rollout
                steps = max(1, a.steps - round(charged / (rollout.tasks_per_step * rollout.group_size)))
            r = run_preset(
                arm.name,
                seed,
                policy_dir,
                out,
                steps,
                a.eval_every,
                a.episodes,
                list(exp.env) + overrides + extra,
                recipe=arm.recipe or exp.recipe,
                logged=exp.logged,
                as_preset=False,
            )
            for point in r["curve"]:
                point["samples"] += charged
            if arm.prepared and prepared:
                r["prepare"] = {"samples": charged, **prepared[2]}
            results.append(r)
            (out / "results.json").write_text(json.dumps({"runs": results}, indent=2))
    return results


def versus(results: list[dict], arm: str, baseline: str) -> tuple[float, float, float, list[float]] | None:
    """`arm`'s final accuracy minus `baseline`'s, paired by seed: mean, 95% t-interval, per-seed values.

    The seeds' warm starts differ a lot (0.29 / 0.70 / 0.38 held-out), so the paired difference is the
    comparison with the power to tell; None when no seed ran both."""
    final = {(r["preset"], r["seed"]): r["curve"][-1]["accuracy"] for r in results}
    diffs = [
        final[(arm, s)] - final[(baseline, s)] for (a, s) in final if a == arm and (baseline, s) in final
    ]
    if not diffs:
        return None
    mean, half = statistics.fmean(diffs), t_half(diffs)
    return mean, mean - half, mean + half, diffs


def diagnostics(results: list[dict], logged: tuple[str, ...]) -> dict[str, dict[str, tuple[float, float]]]:
    """Per arm and logged metric: the mean over seeds of its first-5-step and last-5-step means."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for name in dict.fromkeys(r["preset"] for r in results):
        runs = [r for r in results if r["preset"] == name]
        keys = sorted({k for r in runs for k in r["mechanism"] if k.startswith(logged)})
        row = {}
        for k in keys:
            series = [r["mechanism"][k] for r in runs if r["mechanism"].get(k)]
            if series:
                row[k] = (
                    statistics.fmean(statistics.fmean(s[:5]) for s in series),
                    statistics.fmean(statistics.fmean(s[-5:]) for s in series),
                )
        out[name] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("experiment", choices=sorted(EXPERIMENTS))
    ap.add_argument("--arms", help="comma-separated subset of the experiment's arms (default: all)")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument(
        "--warm",
        default="runs/bench_alg_s{seed}",
        help="DIR holding warm-seedN/ ({seed} becomes N): benchmarks/algorithms.py's warm starts; "
        "trained here when missing",
    )
    ap.add_argument(
        "--warm-seed",
        type=int,
        default=None,
        help="experiments with a warm start of their own: train (or reuse) seed N's in --warm DIR, and start "
        "every seed from it (costly warm starts: the seeds then differ in RL only)",
    )
    ap.add_argument("--out", default=None, help="run folder (default runs/shaping/<experiment>)")
    ap.add_argument("--merge", nargs="+", metavar="DIR", help="summarise several runs' results.json instead")
    ap.add_argument("overrides", nargs="*", help="key=value overrides for every arm")
    a = ap.parse_intermixed_args()
    exp = EXPERIMENTS[a.experiment]
    out = Path(a.out or f"runs/shaping/{a.experiment}")
    out.mkdir(parents=True, exist_ok=True)
    if a.merge:
        results = [r for d in a.merge for r in json.loads((Path(d) / "results.json").read_text())["runs"]]
    else:
        wanted = a.arms.split(",") if a.arms else [arm.name for arm in exp.arms]
        unknown = set(wanted) - {arm.name for arm in exp.arms}
        if unknown:
            ap.error(f"unknown arms {sorted(unknown)}; {a.experiment} has {[arm.name for arm in exp.arms]}")
        arms = [arm for arm in exp.arms if arm.name in wanted]
        results = run(exp, arms, [int(s) for s in a.seeds.split(",")], a.warm, out, a, a.overrides)
    rows = summarise(results, threshold=1.0)
    baseline = rows[0]["preset"]
    for r in rows:
        r["vs_baseline"] = versus(results, r["preset"], baseline)
    diag = diagnostics(results, exp.logged)
    summary = json.dumps({"runs": results, "table": rows, "diagnostics": diag}, indent=2)
    (out / "results.json").write_text(summary)
    if a.merge:
        (REPO / "benchmarks" / "results" / f"shaping_{a.experiment}.json").write_text(summary)
        plot(results, REPO / "benchmarks" / "results" / f"shaping_{a.experiment}.png", exp.title, exp.plotted)
    print(
        f"\n| arm | seeds | warm start | final (95% CI over seeds) | gain (paired 95% CI) | − {baseline} "
        "(paired 95% CI; per seed) | samples | train s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        lo, hi = r["final_ci_seeds"]
        glo, ghi = r["gain_ci_seeds"]
        runs = [x for x in results if x["preset"] == r["preset"]]
        samples = statistics.fmean(x["curve"][-1]["samples"] for x in runs)
        ci = f"[{lo:.3f}, {hi:.3f}]" if not math.isnan(lo) else "—"
        gci = f"[{glo:+.3f}, {ghi:+.3f}]" if not math.isnan(glo) else "—"
        vs = r["vs_baseline"]
        vcol = (
            "—"
            if vs is None or r["preset"] == baseline
            else f"{vs[0]:+.3f} "
            + (f"[{vs[1]:+.3f}, {vs[2]:+.3f}]" if not math.isnan(vs[1]) else "—")
            + "; "
            + " / ".join(f"{d:+.3f}" for d in vs[3])
        )
        print(
            f"| {r['preset']} | {r['seeds']} | {r['start']:.3f} | {r['final']:.3f} {ci} | {r['gain']:+.3f} {gci} | "
            f"{vcol} | {samples:,.0f} | {r['train_seconds']:.0f} |"
        )
    print("\nDiagnostics (mean over seeds of the first 5 → last 5 steps):")
    for name, row in diag.items():
        print(f"- {name}: " + ", ".join(f"{k} {a0:.3f} → {a1:.3f}" for k, (a0, a1) in row.items()))


if __name__ == "__main__":
    main()
