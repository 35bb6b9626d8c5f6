"""Every preset on the same Math task, from the same warm start per seed: learning curves side by side.

For each seed the tiny policy is warm-started once (the quickstart's supervised
warm start, seeded), then each preset (`argym.algorithms.presets`) trains a copy
of it at the quickstart's scale (lr 2e-4, 32 tasks × 8 samples) with the
preset's algorithm, its own optimizer steps per rollout included: GRPO,
Dr.GRPO, RLOO and REINFORCE++ one mini-batch (fully on-policy, ratio 1), GSPO 4
mini-batches, DAPO and VAPO 16. Held-out greedy accuracy is measured on the same
test tasks every `--eval-every` steps.

Beside accuracy each preset records whether its defining mechanism acted: the
mean clip fraction over training (the learner's `train/clip_frac`; 0 for the
on-policy presets by construction) and, for VAPO, the critic's explained variance
(1 − Var(R − V)/Var(R), V the values the advantages used) and value loss. Final
accuracies come with a 95% t-interval across seeds and the pooled Wilson
interval over all seeds' test episodes.

Writes `<out>/curves.png` (every preset's mean curve vs. samples and vs.
wall-clock, one figure), `<out>/results.json`, and prints a Markdown table.

    .venv/bin/python benchmarks/algorithms.py [--steps 100] [--seeds 0,1,2] [--presets grpo,dapo,...]
        [--out runs/bench_algorithms] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

# two-sided 95% Student-t quantiles t_{0.975, df} for the across-seed interval (df = seeds − 1)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def t_half(xs: list[float]) -> float:
    """Half-width of the 95% Student-t interval of the mean of `xs` (nan for fewer than 2 values)."""
    if len(xs) < 2:
        return math.nan
    return T975.get(len(xs) - 1, 1.96) * statistics.stdev(xs) / math.sqrt(len(xs))


def warm_start(out: Path, seed: int, overrides: list[str], recipe: str | None = None) -> Path:
    """The recipe's supervised warm start (None: the quickstart's), seeded; its policy dir."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(recipe, overrides + ["steps=0", f"seed={seed}", f"out_dir={out / f'warm-seed{seed}'}"])
    trainer = Trainer(cfg)
    trainer.close()
    return out / f"warm-seed{seed}" / "checkpoint" / "policy"


def run_preset(
    name: str,
    seed: int,
    policy_dir: Path,
    out: Path,
    steps: int,
    eval_every: int,
    episodes: int,
    overrides: list[str],
    recipe: str | None = None,
    logged: tuple[str, ...] = (),
    as_preset: bool = True,
) -> dict:
    """Train one arm from `policy_dir`; held-out accuracy every `eval_every` steps.

    An arm is a preset (`name`, set as `algo`) or, with `as_preset=False`, `recipe` (None: the
    quickstart's) with `overrides` (`benchmarks/shaping.py`). Metrics whose names start with one of `logged` are kept per step
    beside the mechanism columns, so a null result can be explained from its own diagnostics.
    """
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(
        recipe,
        overrides
        + ([f"algo={name}"] if as_preset else [])
        + [
            "policy.kind=hf",
            f"policy.path={policy_dir}",
            "warm_start.steps=0",
            f"steps={steps}",
            "eval.every=0",
            f"seed={seed}",
            f"out_dir={out / name.replace('+', 'p') / f'seed{seed}'}",
            f"checkpoint_every={10**6}",
        ],
    )
    t0 = time.perf_counter()
    trainer = Trainer(cfg)  # VAPO's value pretraining happens here and counts in wall-clock and samples
    per_draw = cfg.rollout.tasks_per_step * cfg.rollout.group_size
    samples = per_draw * cfg.algorithm.value_pretrain_steps if cfg.algorithm.advantage == "gae" else 0
    train_s = time.perf_counter() - t0
    first = trainer.evaluate(episodes)
    curve = [{"step": 0, "samples": samples, "seconds": train_s, "accuracy": first.mean}]
    mechanism: dict[str, list[float]] = {
        "clip_frac": [],
        "optimizer_steps": [],
        "value_explained_var": [],
        "value_loss": [],
    }
    try:
        for step in range(1, steps + 1):
            t = time.perf_counter()
            m = trainer.train_step()
            trainer.step = step
            train_s += time.perf_counter() - t
            # rolled out: every draw of dynamic sampling (kept or not), every retry of R³L
            samples += max(int(m["train/trajectories"]), per_draw * int(m.get("sampling/draws", 1)))
            mechanism["clip_frac"].append(m.get("train/clip_frac", 0.0))
            mechanism["optimizer_steps"].append(m.get("train/optimizer_steps", 0.0))
            if "value/loss" in m:
                mechanism["value_explained_var"].append(m["value/explained_var"])
                mechanism["value_loss"].append(m["value/loss"])
            for key in (k for k in m if k.startswith(logged)) if logged else ():
                mechanism.setdefault(key, []).append(m[key])
            if step % eval_every == 0 or step == steps:
                result = trainer.evaluate(episodes)
                curve.append({"step": step, "samples": samples, "seconds": train_s, "accuracy": result.mean})
                print(
                    f"  {name:12} seed {seed} step {step:4d}  acc {result.mean:.3f}  clip "
                    f"{statistics.fmean(mechanism['clip_frac']):.4f}  {train_s:6.0f} s",
                    flush=True,
                )
    finally:
        trainer.close()
    final_n = result.n if steps else first.n
    return {
        "preset": name,
        "seed": seed,
        "curve": curve,
        "mechanism": mechanism,
        "final_successes": round(curve[-1]["accuracy"] * final_n),
        "final_n": final_n,
    }


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def summarise(results: list[dict], threshold: float) -> list[dict]:
    """One row per preset: accuracies over seeds (t-interval, pooled Wilson) and the mechanism columns."""
    from argym.stats import wilson_interval

    rows = []
    for name in dict.fromkeys(r["preset"] for r in results):
        runs = [r for r in results if r["preset"] == name]
        finals = [r["curve"][-1]["accuracy"] for r in runs]
        mean = statistics.fmean(finals)
        half = t_half(finals)
        pooled = wilson_interval(sum(r["final_successes"] for r in runs), sum(r["final_n"] for r in runs))
        reach = [next((p["samples"] for p in r["curve"] if p["accuracy"] >= threshold), None) for r in runs]

        def mech(key: str, runs: list = runs) -> float:
            return _mean([x for r in runs for x in r["mechanism"][key]])

        last_ev = [
            r["mechanism"]["value_explained_var"][-1] for r in runs if r["mechanism"]["value_explained_var"]
        ]
        gains = [r["curve"][-1]["accuracy"] - r["curve"][0]["accuracy"] for r in runs]  # paired by seed
        gain_half = t_half(gains)
        rows.append(
            {
                "preset": name,
                "seeds": len(runs),
                "start": statistics.fmean(r["curve"][0]["accuracy"] for r in runs),
                "final": mean,
                "final_ci_seeds": [mean - half, mean + half],
                "final_ci_pooled": list(pooled),
                "finals": finals,
                "gain": statistics.fmean(gains),
                "gain_ci_seeds": [statistics.fmean(gains) - gain_half, statistics.fmean(gains) + gain_half],
                "samples_to_threshold": reach,
                "train_seconds": statistics.fmean(r["curve"][-1]["seconds"] for r in runs),
                "clip_frac": mech("clip_frac"),
                "optimizer_steps": mech("optimizer_steps"),
                "value_explained_var": mech("value_explained_var"),
                "value_explained_var_last": _mean(last_ev),
                "value_loss": mech("value_loss"),
            }
        )
    return rows


TITLE = "argym presets on argym/Math-v0, two-digit addition, tiny policy, same warm start per seed"


def _band(ax, x: list[float], per_seed: list[list[float]], label: str | None = None, marker: str = "o"):
    """The mean over seeds as a line, min–max over seeds as a band; `per_seed[i]`: the seeds' values at x[i]."""
    (line,) = ax.plot(x, [statistics.fmean(v) for v in per_seed], marker=marker, label=label)
    ax.fill_between(
        x, [min(v) for v in per_seed], [max(v) for v in per_seed], color=line.get_color(), alpha=0.12
    )


def _diagnostic(mechanism: dict[str, list[float]], name: str) -> list[float]:
    """A run's series of `name`; ``*/suffix``: the first metric ending in ``/suffix`` (arms whose component
    differs, e.g. ``majority/label_accuracy`` beside ``co_reward_data/label_accuracy``)."""
    if name.startswith("*/"):
        name = next((k for k in mechanism if k.endswith(name[1:])), name)
    return mechanism.get(name, [])


def plot(results: list[dict], path: Path, title: str = TITLE, diagnostic: str | None = None) -> None:
    """Every preset's mean curve over seeds (band: min–max over seeds), vs. samples and vs. wall-clock;
    with `diagnostic` (a metric the runs logged per step), a third panel of it per RL step: the mechanism
    beside its effect, so a flat accuracy can be told from a mechanism that never fired."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3 if diagnostic else 2, figsize=(18 if diagnostic else 12, 4.5))
    axes[1].sharey(axes[0])
    for name in dict.fromkeys(r["preset"] for r in results):
        runs = [r for r in results if r["preset"] == name]
        curves = [r["curve"] for r in runs]
        n = min(len(c) for c in curves)
        acc = [[c[i]["accuracy"] for c in curves] for i in range(n)]
        for ax, key in zip(axes, ("samples", "seconds")):
            x = [statistics.fmean(c[i][key] for c in curves) for i in range(n)]
            _band(ax, x, acc, f"{name} (n={len(curves)})")
        if diagnostic:
            logged = [_diagnostic(r["mechanism"], diagnostic) for r in runs]
            steps = min(len(v) for v in logged)
            if steps:
                _band(
                    axes[2],
                    list(range(1, steps + 1)),
                    [[v[i] for v in logged] for i in range(steps)],
                    marker="",
                )
            else:
                axes[2].plot([], [])  # keeps the colours in step with the other panels
    axes[0].set_xlabel("samples (trajectories rolled out)")
    axes[1].set_xlabel("wall-clock training seconds")
    axes[0].set_ylabel("held-out accuracy (greedy), mean over seeds")
    axes[1].legend(fontsize=8)
    if diagnostic:
        axes[2].set_xlabel("RL step")
        axes[2].set_ylabel(f"{diagnostic} (training batch), mean over seeds")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def main() -> None:
    from argym.algorithms.presets import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--out", default="runs/bench_algorithms")
    ap.add_argument(
        "--warm",
        metavar="DIR",
        help="take seed N's warm start from DIR/warm-seedN (an earlier run's --out; {seed} in DIR becomes N) "
        "instead of training one: the same warm-started policy for another env setting (e.g. "
        "env.kwargs.max_attempts=2)",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="DIR",
        help="summarise the results.json of several runs (e.g. one process per seed) instead of training",
    )
    ap.add_argument("overrides", nargs="*", help="key=value overrides of the quickstart recipe for every run")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [] if a.merge else [int(s) for s in a.seeds.split(",")]
    results = [r for d in a.merge or [] for r in json.loads((Path(d) / "results.json").read_text())["runs"]]
    for seed in seeds:
        policy_dir = (
            Path(a.warm.format(seed=seed)) / f"warm-seed{seed}" / "checkpoint" / "policy"
            if a.warm
            else warm_start(out, seed, a.overrides)
        )
        for name in a.presets.split(","):
            results.append(
                run_preset(name, seed, policy_dir, out, a.steps, a.eval_every, a.episodes, a.overrides)
            )
            (out / "results.json").write_text(json.dumps({"runs": results}, indent=2))
    rows = summarise(results, a.threshold)
    (out / "results.json").write_text(json.dumps({"runs": results, "table": rows}, indent=2))
    plot(results, out / "curves.png")
    print(
        "\n| preset | seeds | warm start | final (95% CI over seeds) | pooled Wilson 95% | "
        "gain (95% CI over seeds, paired) | opt. steps / rollout | clip frac | critic EV (last) | value loss | train s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        lo, hi = r["final_ci_seeds"]
        seeds_ci = f"[{lo:.3f}, {hi:.3f}]" if not math.isnan(lo) else "—"
        glo, ghi = r["gain_ci_seeds"]
        gain_ci = f"[{glo:+.3f}, {ghi:+.3f}]" if not math.isnan(glo) else "—"
        ev = (
            "—"
            if r["value_explained_var"] is None
            else f"{r['value_explained_var']:.2f} ({r['value_explained_var_last']:.2f})"
        )
        print(
            f"| {r['preset']} | {r['seeds']} | {r['start']:.3f} | {r['final']:.3f} {seeds_ci} | "
            f"[{r['final_ci_pooled'][0]:.3f}, {r['final_ci_pooled'][1]:.3f}] | {r['gain']:+.3f} {gain_ci} | "
            f"{_fmt(r['optimizer_steps'], '.0f')} | {_fmt(r['clip_frac'], '.4f')} | {ev} | "
            f"{_fmt(r['value_loss'], '.4f')} | {r['train_seconds']:.0f} |"
        )


if __name__ == "__main__":
    main()
