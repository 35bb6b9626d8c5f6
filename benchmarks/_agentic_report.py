"""The report of `agentic_learning.py`: paired differences, the summary over seeds and against TRL, the curves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def paired(after: dict[str, float], before: dict[str, float]) -> dict[str, Any]:
    """Mean of after − before over the tasks both evaluated, with a 95% normal interval on the paired
    differences (the same tasks, so the task-to-task spread cancels: tighter than two Wilson intervals)."""
    import math
    import statistics

    from argym.stats import z_value

    d = [after[t] - before[t] for t in after if t in before]
    mean = sum(d) / max(len(d), 1)
    se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else 0.0
    z = z_value(0.95)
    return {"mean": mean, "ci": [mean - z * se, mean + z * se], "n": len(d)}


def summarize(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    before = rows.get("before", {}).get("curve", [{}])[-1].get("per_task")
    for arm, row in rows.items():
        final = row["curve"][-1]
        out[arm] = {k: v for k, v in final.items() if k != "per_task"} | {"setup_s": row["setup_s"]}
        if before is not None and arm != "before":
            out[arm]["vs_before"] = paired(final["per_task"], before)
    seeds = [out[k]["accuracy"] for k in out if k.startswith("argym-")]
    if seeds:
        out["argym_seeds"] = {
            "mean": sum(seeds) / len(seeds),
            "min": min(seeds),
            "max": max(seeds),
            "n": len(seeds),
        }
    if "trl" in rows and seeds:
        target = rows["trl"]["curve"][-1]["accuracy"]
        trl_end = rows["trl"]["curve"][-1]["train_s"]

        start = rows.get("before", {}).get("curve", [])[-1:]  # every arm starts at the warm start, at time 0

        def first_at(curve: list[dict[str, Any]]) -> float | None:
            return next((p["train_s"] for p in start + curve if p["accuracy"] >= target), None)

        out["vs_trl"] = {
            "trl_final_accuracy": target,
            "trl_s": first_at(rows["trl"]["curve"]),
            "argym_s": {k: first_at(rows[k]["curve"]) for k in rows if k.startswith("argym-")},
            # argym's held-out accuracy at its last evaluation no later than TRL's end
            "argym_at_trl_end": {
                k: max(
                    (p for p in rows[k]["curve"] if p["train_s"] <= trl_end),
                    key=lambda p: p["train_s"],
                    default={"accuracy": None},
                )["accuracy"]
                for k in rows
                if k.startswith("argym-")
            },
        }
    return out


def plot(rows: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    start = rows.get("before", {}).get("curve", [])
    seeds = iter(["tab:blue", "tab:cyan", "tab:purple", "tab:green", "tab:olive", "tab:pink"])
    for arm, row in sorted(rows.items()):
        if arm == "before":
            continue
        pts = start[-1:] + row["curve"]
        color = "tab:orange" if arm == "trl" else next(seeds, None)  # TRL orange, argym's seeds cool colours
        left.errorbar(
            [p["train_s"] / 60 for p in pts],
            [p["accuracy"] for p in pts],
            yerr=[[p["accuracy"] - p["ci"][0] for p in pts], [p["ci"][1] - p["accuracy"] for p in pts]],
            marker="o",
            capsize=3,
            label=arm,
            color=color,
        )
        right.plot(
            [s["step"] for s in row["steps"]], [s["success"] for s in row["steps"]], label=arm, color=color
        )
    left.set(
        xlabel="wall time, minutes (setup included)",
        ylabel="held-out greedy accuracy (95% Wilson)",
        ylim=(0, 1),
    )
    right.set(xlabel="step", ylabel="training success (sampled)", ylim=(0, 1))
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(s: dict[str, Any]) -> None:
    print(
        "| arm | held-out | 95% CI | vs before (paired) | valid calls | tool errors | unreadable | turns | setup s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for arm, r in s.items():
        if "accuracy" not in r:
            continue
        vs = r.get("vs_before")
        diff = f"{vs['mean']:+.3f} [{vs['ci'][0]:+.3f}, {vs['ci'][1]:+.3f}]" if vs else "—"
        print(
            f"| {arm} | {r['accuracy']:.3f} | [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] | {diff} | "
            f"{r['valid_tool_calls']:.2f} | {r['tool_errors']:.2f} | {r['unreadable_calls']:.2f} | {r['turns']:.2f} "
            f"| {r['setup_s']:.0f} |"
        )
    for key in ("argym_seeds", "vs_trl"):
        if key in s:
            print(f"{key}: {json.dumps(s[key])}")
