"""Process-reward experiments on the tiny policy, side by side from the same warm start and seeds.

    .venv/bin/python benchmarks/process_rewards.py pure      # PURE's claim: sum-form credit is gamed, min-form is not
    .venv/bin/python benchmarks/process_rewards.py sar       # outcome only vs outcome + 0.2·SAR
    .venv/bin/python benchmarks/process_rewards.py agentprm  # outcome-only GRPO vs + AgentPRM step rewards vs best-of-N
    .venv/bin/python benchmarks/process_rewards.py smollm2 --episodes 40 --max-new-tokens 64  # SmolLM2-135M: steps, SAR

Common options: --steps, --eval-every, --episodes, --out (default runs/bench_process_rewards).
Each experiment writes `<out>/<name>/results.json` and `benchmarks/results/process_rewards_<name>.png`,
and prints a Markdown table (BENCHMARKS.md quotes them).

`pure` and `sar` share one warm start: the tiny policy is fine-tuned on oracle answers
to two-digit additions of which some open with one or two filler steps
("Let me check this again." + a blank line), so padding is something the policy can
already do and RL can amplify. The gameable PRM scores a filler step 0.9 (it "looks
careful") and the answer step by the env's verdict (+1 / −1), as a PRM trained on
reflective solutions might (PURE, arXiv 2504.15275, §5: the policy learns to emit
steps the PRM overrates).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from argym.rewards.prm import register_prm

FILLER = "Let me check this again."
ROOT = Path(__file__).resolve().parent
TINY = [
    "rollout.tasks_per_step=16",
    "rollout.group_size=8",
    "eval.every=0",
    f"checkpoint_every={10**6}",
    "warm_start.steps=0",
    "policy.kind=hf",
]


@register_prm("filler_loving")
class FillerLovingPRM:
    """A PRM that can be gamed: filler steps 0.9, the answer step ±1 by the env's verdict, other steps 0."""

    def score(self, trajectory, steps=None):
        from argym.rewards.prm import RuleBasedPRM
        from argym.rewards.steps import split_steps

        steps = split_steps(trajectory) if steps is None else steps
        rule = RuleBasedPRM(neutral=0.0).score(trajectory, steps)
        return [
            r if j + 1 == len(steps) else (0.9 if s.text.strip() == FILLER else 0.0)
            for j, (s, r) in enumerate(zip(steps, rule))
        ]


def save_whole(policy, path: Path) -> None:
    """`policy.save(path)` under a temporary name, then renamed: `path` exists only once it is complete, so
    a rerun after a kill mid-save trains again instead of loading a checkpoint without its weights
    (transformers writes config.json before the weights)."""
    import shutil

    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save(tmp)
    tmp.rename(path)


def filler_warm_start(out: Path, steps: int, seed: int = 0) -> Path:
    """The tiny policy fine-tuned on oracle answers with 0, 1 or 2 filler steps (50/35/15%)."""
    import numpy as np

    from argym.agents.hf import HFPolicy
    from argym.agents.renderer import conversation_ids
    from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
    from argym.algorithms.sft import warm_start
    from argym.envs.math.arithmetic import arithmetic_source

    path = out / "warm_filler"
    if path.is_dir():
        return path
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=seed), tok, name="tiny")
    src, rng = arithmetic_source(digits=2, ops="+", terms=2), np.random.default_rng(seed + 1)
    seqs = []
    for _ in range(2000):
        task = src.sample(rng, "train")
        k = int(rng.choice(3, p=[0.5, 0.35, 0.15]))
        answer = f"{FILLER}\n\n" * k + f"\\boxed{{{task.answer}}}"
        seqs.append(
            conversation_ids(policy.renderer, [*task.prompt, {"role": "assistant", "content": answer}])
        )
    t0 = time.perf_counter()
    losses = warm_start(policy, seqs, steps, batch_size=64, lr=2e-3, seed=seed + 2)
    print(
        f"warm start: {steps} steps, loss {losses[0]:.3f} → {losses[-1]:.3f} ({time.perf_counter() - t0:.0f} s)"
    )
    save_whole(policy, path)
    return path


def run_arm(name: str, overrides: list[str], steps: int, eval_every: int, episodes: int, out: Path) -> dict:
    """Train one arm, evaluating held-out greedy accuracy every `eval_every` steps; per-step metrics kept."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(None, overrides + [f"steps={steps}", f"out_dir={out / name}"])
    trainer = Trainer(cfg)
    per_draw = cfg.rollout.tasks_per_step * cfg.rollout.group_size
    curve, t_train = [], 0.0
    try:
        curve.append({"step": 0, "samples": 0, "accuracy": trainer.evaluate(episodes).mean})
        for step in range(1, steps + 1):
            t = time.perf_counter()
            m = trainer.train_step()
            trainer.step = step
            t_train += time.perf_counter() - t
            row = {
                "step": step,
                "samples": step * per_draw,
                "seconds": t_train,
                **{k: v for k, v in m.items() if k.startswith(("reward/", "train/"))},
            }
            if step % eval_every == 0 or step == steps:
                row["accuracy"] = trainer.evaluate(episodes).mean
                print(
                    f"  {name:10} step {step:3d}  acc {row['accuracy']:.3f}  steps/resp "
                    f"{m.get('reward/process_steps', float('nan')):.2f}  tokens {m['train/response_tokens']:.1f}"
                    f"  {t_train:5.0f} s",
                    flush=True,
                )
            curve.append(row)
    finally:
        trainer.close()
    return {"arm": name, "curve": curve}


def tail_mean(curve: list[dict], key: str, n: int = 5) -> float:
    vals = [r[key] for r in curve if key in r][-n:]
    return sum(vals) / max(len(vals), 1)


def plot_arms(results: list[dict], panels: list[tuple[str, str]], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for ax, (key, label) in zip(axes, panels):
        for r in results:
            pts = [(p["step"], p[key]) for p in r["curve"] if key in p]
            ax.plot(
                [s for s, _ in pts],
                [v for _, v in pts],
                marker="o" if key == "accuracy" else None,
                markersize=3,
                label=r["arm"],
            )
        ax.set_xlabel("RL step")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def pure(a: argparse.Namespace) -> None:
    """Sum-form vs min-form credit of the same gameable PRM, same warm start and seeds."""
    out = Path(a.out)
    warm = filler_warm_start(out, a.warm_steps)
    common = TINY + [
        f"policy.path={warm}",
        "rollout.max_new_tokens=80",
        "algorithm.advantage=returns",
        "reward.weights.outcome=1.0",
        "reward.weights.process=1.0",
        "reward.prm=filler_loving",
    ]
    results = [
        run_arm(credit, common + [f"reward.credit={credit}"], a.steps, a.eval_every, a.episodes, out / "pure")
        for credit in ("sum", "min")
    ]
    finish(
        "pure",
        results,
        out,
        [
            ("accuracy", "held-out accuracy (greedy)"),
            ("reward/process_steps", "steps per response (train)"),
            ("train/response_tokens", "response tokens (train)"),
        ],
        "PURE on argym/Math-v0 (tiny policy): a PRM that likes filler steps, sum- vs min-form credit",
    )


def sar(a: argparse.Namespace) -> None:
    """Outcome only vs outcome + 0.2·SAR; the filler-loving PRM is logged (weight 0) to count steps."""
    out = Path(a.out)
    warm = filler_warm_start(out, a.warm_steps)
    common = TINY + [
        f"policy.path={warm}",
        "rollout.max_new_tokens=80",
        "reward.weights.process=0.0",
        "reward.prm=filler_loving",
    ]
    arms = {"outcome": ["reward.weights.sar=0.0"], "outcome+sar": ["reward.weights.sar=0.2"]}
    results = [
        run_arm(name, common + extra, a.steps, a.eval_every, a.episodes, out / "sar")
        for name, extra in arms.items()
    ]
    finish(
        "sar",
        results,
        out,
        [
            ("accuracy", "held-out accuracy (greedy)"),
            ("train/response_tokens", "response tokens (train)"),
            ("reward/sar", "SAR (train)"),
        ],
        "Self-Aligned Reward on argym/Math-v0 (tiny policy), α = 0.2 vs outcome only",
    )


AGENTPRM_ENV = ("argym/Math-v0", {"tasks": "arithmetic(digits=2,ops=+,terms=2)", "max_attempts": 3})


def train_agent_prm(policy_dir: Path, out: Path, prm_tasks: int, seed: int = 0) -> tuple[Path, int, dict]:
    """AgentPRM stages (1)-(3) (arXiv 2502.10325 §3): roll out the policy at `policy_dir` on
    `prm_tasks` training tasks × 8, Monte-Carlo Q targets with 2 branches restored from each
    non-final attempt's snapshot, a small transformer PRM trained on them. Returns the PRM's dir,
    the samples it cost (rollouts and branch episodes) and its held-out report (BCE, AUC)."""
    import numpy as np

    import argym
    from argym.agents.hf import HFPolicy
    from argym.agents.policy import SamplingParams
    from argym.agents.rollout import RolloutEngine
    from argym.agents.tiny import build_tiny_tokenizer
    from argym.algorithms.agent_prm import AgentPRMConfig, agent_prm_round, policy_actor
    from argym.envs.executors import Executors
    from argym.rewards.prm import build_classifier

    env_id, kwargs = AGENTPRM_ENV
    policy = HFPolicy.load(policy_dir)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=16)
    t0 = time.perf_counter()
    with RolloutEngine(
        env_id, {**kwargs, "split": "train"}, policy, sampling, max_total_tokens=512
    ) as engine:
        rng = np.random.default_rng(123 + seed)
        tasks = [engine.task_source.sample(rng, "train") for _ in range(prm_tasks)]
        trajs = engine.run(tasks, group_size=8, seed=11 + seed)
    prm = build_classifier(build_tiny_tokenizer(), hidden_size=64, num_layers=2, num_heads=4, seed=seed)
    cfg = AgentPRMConfig(branches=2, epochs=5, lr=1e-3, batch_size=32, seed=seed)
    branched = sum(max(t.turns - 1, 0) for t in trajs) * cfg.branches  # branch episodes are samples too
    with Executors() as executors:  # the branch envs share one verifier pool, not one each
        report = agent_prm_round(
            prm,
            trajs,
            cfg,
            make_env=lambda: argym.make(env_id, **{**kwargs, "split": "train", "executors": executors}),
            act=policy_actor(policy, sampling, seed=5 + seed),
        )
    prm_dir = out / "prm"
    prm.save(prm_dir)
    print(
        f"PRM: {report} from {len(trajs)} rollouts + {branched} branches ({time.perf_counter() - t0:.0f} s)"
    )
    return prm_dir, len(trajs) + branched, report


def agentprm(a: argparse.Namespace) -> None:
    """AgentPRM on Math with three attempts: outcome-only GRPO vs GRPO + PRM step rewards, same samples;
    and the PRM as a best-of-N selector at inference."""
    from argym.agents.evaluate import evaluate
    from argym.agents.hf import HFPolicy
    from argym.agents.policy import SamplingParams
    from argym.agents.prm_best_of_n import PRMBestOfN, prm_scorer
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer
    from argym.rewards.prm import ClassifierPRM

    out = Path(a.out) / "agentprm"
    env_id, kwargs = AGENTPRM_ENV
    env_over = [f"env.kwargs.max_attempts={kwargs['max_attempts']}"]
    warm_dir = out / "warm"
    if not (warm_dir / "checkpoint" / "policy" / "config.json").is_file():
        Trainer(
            load_config(None, env_over + ["steps=0", f"out_dir={warm_dir}", "warm_start.steps=200"])
        ).close()
    warm = warm_dir / "checkpoint" / "policy"
    policy = HFPolicy.load(warm)
    sampling = SamplingParams(temperature=1.0, max_new_tokens=16)
    prm_dir, prm_samples, report = train_agent_prm(warm, out, a.prm_tasks)
    prm = ClassifierPRM.load(prm_dir)

    # (4a) RL: outcome-only for `steps`; with PRM step rewards for as many samples in all
    per_step = 16 * 8
    prm_steps = max(1, a.steps - round(prm_samples / per_step))
    common = TINY + env_over + [f"policy.path={warm}", "rollout.max_new_tokens=16"]
    arms = [
        run_arm("outcome", common, a.steps, a.eval_every, a.episodes, out),
        run_arm(
            "outcome+agentprm",
            common
            + [
                "algorithm.advantage=returns",
                "reward.weights.process=0.5",
                f"reward.prm=hf:{prm_dir}",
                "reward.credit=min",
            ],
            prm_steps,
            a.eval_every,
            a.episodes,
            out,
        ),
    ]
    for p in arms[1]["curve"]:
        p["samples"] += prm_samples
    # (4b) best-of-N at inference on the warm policy: N samples per turn, the PRM keeps one
    best = []
    for n in (1, 2, 4, 8):
        agent = PRMBestOfN(policy, prm_scorer(prm), n=n, sampling=sampling, seed=7)
        r = evaluate(env_id, kwargs, agent, episodes=a.episodes, seed=0)
        best.append({"n": n, "accuracy": r.mean, "ci": [r.ci_low, r.ci_high]})
        print(f"  best-of-{n}: {r.mean:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]", flush=True)
    greedy = evaluate(env_id, kwargs, policy, episodes=a.episodes, seed=0).mean
    (out / "results.json").write_text(
        json.dumps(
            {
                "prm": report,
                "prm_samples": prm_samples,
                "runs": arms,
                "best_of_n": best,
                "warm_greedy": greedy,
            },
            indent=2,
        )
    )
    plot_agentprm(arms, best, greedy, report, ROOT / "results" / "process_rewards_agentprm.png")
    print("\n| arm | samples | held-out acc. start | final | best |\n| --- | --- | --- | --- | --- |")
    for r in arms:
        accs = [p["accuracy"] for p in r["curve"] if "accuracy" in p]
        print(
            f"| {r['arm']} | {r['curve'][-1]['samples']} | {accs[0]:.3f} | {accs[-1]:.3f} | {max(accs):.3f} |"
        )
    print("\n| best-of-N (warm policy, T = 1) | " + " | ".join(str(b["n"]) for b in best) + " |")
    print("| --- |" + " --- |" * len(best))
    print("| held-out success | " + " | ".join(f"{b['accuracy']:.3f}" for b in best) + " |")


def plot_agentprm(arms: list[dict], best: list[dict], greedy: float, report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for r in arms:
        pts = [(p["samples"], p["accuracy"]) for p in r["curve"] if "accuracy" in p]
        axes[0].plot([s for s, _ in pts], [v for _, v in pts], marker="o", markersize=3, label=r["arm"])
    axes[0].set_xlabel("samples (trajectories, PRM data and branches included)")
    axes[0].set_ylabel("held-out success (greedy)")
    axes[0].legend()
    axes[1].plot(
        [b["n"] for b in best], [b["accuracy"] for b in best], marker="o", label="PRM best-of-N (T = 1)"
    )
    axes[1].axhline(greedy, color="grey", linestyle="--", label="warm policy, greedy")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("N candidates per turn")
    axes[1].set_ylabel("held-out success")
    axes[1].set_title(f"PRM held-out AUC {report.get('prm/heldout_auc', float('nan')):.2f}", fontsize=9)
    axes[1].legend()
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle("AgentPRM on argym/Math-v0, max_attempts=3 (tiny policy)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


class ChunkedPolicy:
    """A token policy that generates in chunks: a 49k-token vocabulary's per-step logits for a whole
    evaluation batch would take many GB (HFPolicy keeps them for the sampler's log-probs)."""

    def __init__(self, policy, size: int):
        self.policy, self.size, self.tokenizer = policy, size, policy.tokenizer

    def generate(self, prompts, sampling, seed=None):
        return self.policy.generate(prompts, sampling, seed=seed, batch_size=self.size)


def smollm2(a: argparse.Namespace) -> None:
    """SmolLM2-135M-Instruct on Math arithmetic (`--tasks`): real free-text answers, their steps and SAR.

    Evaluation only (training a 135M model is beyond this machine's shared CPUs in
    the time at hand): k samples per task at T = 0.7; each answer is split into
    steps, scored by SAR under the model itself, and graded. Reported: accuracy,
    steps per answer, SAR of correct vs wrong answers and its AUC for correctness,
    and best-of-k selection by SAR against a random pick (pass@1) and pass@k.
    """
    import numpy as np

    from argym.agents.evaluate import eval_tasks
    from argym.agents.hf import HFPolicy
    from argym.agents.models import resolve_checkpoint
    from argym.agents.policy import SamplingParams
    from argym.agents.rollout import RolloutEngine
    from argym.rewards.prm import roc_auc
    from argym.rewards.sar import sar_rewards
    from argym.rewards.steps import split_steps

    out = Path(a.out) / "smollm2"
    out.mkdir(parents=True, exist_ok=True)
    env_id, kwargs = "argym/Math-v0", {"tasks": a.tasks}
    policy = HFPolicy.load(resolve_checkpoint("smollm2"))
    k = a.samples
    t0 = time.perf_counter()
    tasks = eval_tasks(env_id, kwargs, "test", a.episodes)
    with RolloutEngine(
        env_id,
        {**kwargs, "split": "test"},
        ChunkedPolicy(policy, 16),
        SamplingParams(temperature=0.7, max_new_tokens=a.max_new_tokens),
        max_total_tokens=1024,
    ) as engine:
        trajs = engine.run(tasks, group_size=k, seed=0)
    gen_s = time.perf_counter() - t0
    empty = policy.renderer.prompt_ids([{"role": "user", "content": ""}])
    sar_values = sar_rewards(policy.model, trajs, empty, policy.pad_id)
    steps = [len(split_steps(t, decode=policy.renderer.decode)) for t in trajs]
    ok = np.array([t.success for t in trajs], dtype=float).reshape(-1, k)  # (tasks, k)
    sar_m = np.array(sar_values).reshape(-1, k)
    pick = sar_m.argmax(axis=1)
    rows = {
        "tasks": len(tasks),
        "samples_per_task": k,
        "accuracy_pass1": float(ok.mean()),
        "pass_at_k": float(ok.max(axis=1).mean()),
        "best_of_k_by_sar": float(ok[np.arange(len(ok)), pick].mean()),
        "steps_per_answer": float(np.mean(steps)),
        "steps_correct": float(np.mean([s for s, t in zip(steps, trajs) if t.success] or [float("nan")])),
        "steps_wrong": float(np.mean([s for s, t in zip(steps, trajs) if not t.success] or [float("nan")])),
        "sar_correct": float(np.mean([v for v, t in zip(sar_values, trajs) if t.success] or [float("nan")])),
        "sar_wrong": float(
            np.mean([v for v, t in zip(sar_values, trajs) if not t.success] or [float("nan")])
        ),
        "sar_auc": roc_auc(sar_values, [t.success for t in trajs]),
        "response_tokens": float(np.mean([t.num_policy_tokens for t in trajs])),
        "generation_s": gen_s,
        "total_s": time.perf_counter() - t0,
    }
    (out / "results.json").write_text(
        json.dumps({"table": rows, "example": trajs[0].messages[-1]["content"]}, indent=2)
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].hist(
        [
            [v for v, t in zip(sar_values, trajs) if t.success],
            [v for v, t in zip(sar_values, trajs) if not t.success],
        ],
        bins=20,
        label=["correct", "wrong"],
    )
    axes[0].set_xlabel("SAR of the answer")
    axes[0].legend()
    names = ["pass@1 (random pick)", f"best-of-{k} by SAR", f"pass@{k}"]
    axes[1].bar(names, [rows["accuracy_pass1"], rows["best_of_k_by_sar"], rows["pass_at_k"]])
    axes[1].set_ylabel("held-out accuracy")
    fig.suptitle(f"SmolLM2-135M-Instruct, argym/Math-v0 {kwargs['tasks']}, {len(tasks)} test tasks × {k}")
    fig.tight_layout()
    fig.savefig(ROOT / "results" / "process_rewards_smollm2.png", dpi=110)
    print(json.dumps(rows, indent=2))


def finish(name: str, results: list[dict], out: Path, panels: list[tuple[str, str]], title: str) -> None:
    rows = [
        {
            "arm": r["arm"],
            "start": r["curve"][0]["accuracy"],
            "final": r["curve"][-1]["accuracy"],
            "best": max(p["accuracy"] for p in r["curve"] if "accuracy" in p),
            "steps_per_response_last5": tail_mean(r["curve"], "reward/process_steps"),
            "tokens_last5": tail_mean(r["curve"], "train/response_tokens"),
            "train_success_last5": tail_mean(r["curve"], "train/success"),
            "train_seconds": r["curve"][-1]["seconds"],
        }
        for r in results
    ]
    (out / name).mkdir(parents=True, exist_ok=True)
    (out / name / "results.json").write_text(json.dumps({"runs": results, "table": rows}, indent=2))
    png = ROOT / "results" / f"process_rewards_{name}.png"
    plot_arms(results, panels, title, png)
    print(
        f"\n{png}\n| arm | held-out acc. start | final | best | steps/response (last 5) | response tokens (last 5) "
        f"| train success (last 5) | train s |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    for r in rows:
        print(
            f"| {r['arm']} | {r['start']:.3f} | {r['final']:.3f} | {r['best']:.3f} | "
            f"{r['steps_per_response_last5']:.2f} | {r['tokens_last5']:.1f} | {r['train_success_last5']:.3f} | "
            f"{r['train_seconds']:.0f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("experiment", choices=["pure", "sar", "agentprm", "smollm2"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--warm-steps", type=int, default=300)
    ap.add_argument("--samples", type=int, default=4, help="smollm2: samples per task")
    ap.add_argument(
        "--tasks", default="arithmetic(digits=2,ops=+,terms=2)", help="smollm2: the Math task source"
    )
    ap.add_argument("--max-new-tokens", type=int, default=160, help="smollm2: tokens per answer")
    ap.add_argument(
        "--prm-tasks", type=int, default=32, help="agentprm: tasks × 8 rollouts for the PRM's data"
    )
    ap.add_argument("--out", default="runs/bench_process_rewards")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)  # the machine is shared; two runs must not thrash
    {"pure": pure, "sar": sar, "agentprm": agentprm, "smollm2": smollm2}[a.experiment](a)


if __name__ == "__main__":
    main()
