"""A training run as `argym train` runs it: a held-out evaluation before, `Trainer.fit`, one after.

`Trainer` (algorithms/trainer.py) owns the loop; what stands around it here is
what a person reads of a run: the held-out figures, cached in the run dir so a
resumed run reuses them (`held_out`), the learning curve, and `summary.json`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from argym.algorithms.checkpoint import read_best
from argym.algorithms.config import TrainConfig
from argym.algorithms.metrics import curve_title, plot_learning_curve
from argym.algorithms.trainer import Trainer


def held_out(trainer: Trainer, name: str) -> dict[str, Any]:
    """Evaluate once per run dir and step (`eval_{name}.json`): a resumed run reuses the figures it has,
    and "before" whatever step the run resumes at (it is the figure before the first step)."""
    path = trainer.run_dir / f"eval_{name}.json"
    if path.exists():
        cached: dict[str, Any] = json.loads(path.read_text())
        if cached.get("step") == trainer.step or name == "before":
            return cached
    t0 = time.perf_counter()
    result = trainer.evaluate()
    out = {
        "step": trainer.step,
        "accuracy": result.mean,
        "ci": [result.ci_low, result.ci_high],
        "n": result.n,
        "mean_reward": result.mean_reward,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    path.write_text(json.dumps(out, indent=2))
    result.training_run = {**result.training_run, "step": trainer.step}
    (trainer.run_dir / f"eval_{name}_episodes.json").write_text(json.dumps(result.to_dict()))
    return out


def train(cfg: TrainConfig, console: Any = None) -> dict[str, Any]:
    """Evaluate (`eval.before`), train to `cfg.steps` (resuming if the run dir has a checkpoint), evaluate,
    plot; returns the summary: the before, final and best held-out figures and where the run is."""
    trainer = Trainer(cfg, console)
    try:
        before = held_out(trainer, "before") if cfg.eval.before and trainer.main else None
        if before is not None:
            trainer.console.print(
                f"Held-out success before training: {percent(before)} (step {before['step']}).",
                markup=False,
                highlight=False,
            )
        trainer.fit()
        if not trainer.main:  # the main process evaluates and writes the summary
            return {"steps": trainer.step}
        final = held_out(trainer, "final")
        trainer.metrics.log(trainer.step, {"eval/success": final["accuracy"]})
        records = trainer.metrics.records()
        if before is not None:
            records = [{"step": before["step"], "eval/success": before["accuracy"]}, *records]
        plot_learning_curve(records, trainer.run_dir / "learning_curve.png", title=curve_title(cfg))
        summary: dict[str, Any] = {"steps": trainer.step, "run_dir": str(trainer.run_dir)}
        if before is not None:
            summary["before"] = {k: before[k] for k in ("step", "accuracy", "ci", "n")}
        summary["final"] = {k: final[k] for k in ("accuracy", "ci", "n")}
        best = read_best(trainer.run_dir)
        if best is not None:
            summary["best"] = best
        (trainer.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary
    finally:
        trainer.close()


def percent(figure: dict[str, Any]) -> str:
    """A held-out figure for people: 72.3% (95% interval 68.1–76.0%, n=300)."""
    low, high = figure["ci"]
    return f"{figure['accuracy']:.1%} (95% interval {low:.1%}–{high:.1%}, n={figure['n']})"
