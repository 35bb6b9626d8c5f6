"""The quickstart: warm-start the tiny policy, train it with GRPO on arithmetic, evaluate before and after.

Everything runs on the CPU with the defaults of `TrainConfig`; the figures it
prints are in the README with the tolerance they reproduce within.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from argym.algorithms.checkpoint import read_best
from argym.algorithms.config import load_config
from argym.algorithms.metrics import curve_title, plot_learning_curve
from argym.algorithms.trainer import Trainer
from argym.algorithms.training_run import held_out


def _submit_eval(trainer: Trainer, name: str, submit: Callable[[dict[str, Any]], Any] | None) -> None:
    """Hand the full result of the `name` evaluation (provenance and episodes) to `submit`."""
    if submit is not None:
        submit(json.loads((trainer.run_dir / f"eval_{name}_episodes.json").read_text()))


def run_quickstart(
    out_dir: str = "runs/quickstart",
    overrides: list[str] | tuple[str, ...] = (),
    console: Any = None,
    submit: Callable[[dict[str, Any]], Any] | None = None,
) -> dict[str, Any]:
    """Train and evaluate; writes config, metrics, checkpoint, learning curve and summary.json to `out_dir`.

    `submit`, if given, receives the before and after evaluation results (``EvalResult.to_dict()``);
    the CLI passes `argym.leaderboards.submit`, so the quickstart leaves a two-row board
    (resubmitting a resumed run's cached result stores nothing new).
    """
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    cfg = load_config(None, [f"out_dir={out_dir}", *overrides])
    t0 = time.perf_counter()
    trainer = Trainer(cfg, console)
    try:
        before = held_out(trainer, "before")
        _submit_eval(trainer, "before", submit)
        console.print(f"Held-out accuracy after the warm start: {before['accuracy']:.3f} (n={before['n']}).")
        t_train = time.perf_counter()
        trainer.fit()
        train_s = time.perf_counter() - t_train
        after = held_out(trainer, "after")
        _submit_eval(trainer, "after", submit)
    finally:
        trainer.close()
    records = trainer.metrics.records()
    curve = [
        {"step": 0, "eval/success": before["accuracy"]},
        *records,
        {"step": trainer.step, "eval/success": after["accuracy"]},
    ]
    plot_learning_curve(
        curve,
        trainer.run_dir / "learning_curve.png",
        title=curve_title(cfg),
    )
    summary = {
        "before": before,
        "after": after,
        "gain": after["accuracy"] - before["accuracy"],
        "steps": trainer.step,
        "rl_seconds": round(train_s, 1),
        "total_seconds": round(time.perf_counter() - t0, 1),
        "run_dir": str(trainer.run_dir),
        "best": read_best(trainer.run_dir),
    }
    (trainer.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))

    table = Table(title=f"Held-out accuracy on {before['n']} test tasks ({cfg.env.id})")
    for col in ("", "accuracy", "95% interval"):
        table.add_column(col)
    for name, r in (("before RL (warm start)", before), ("after GRPO", after)):
        table.add_row(name, f"{r['accuracy']:.3f}", f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]")
    console.print(table)
    console.print(
        f"Gain: {summary['gain'] * 100:+.1f} points. Run directory: {trainer.run_dir} "
        f"(learning_curve.png, metrics.jsonl, checkpoint/, summary.json)."
    )
    if summary["best"] is not None:
        best = summary["best"]
        console.print(
            f"Best held-out accuracy: {best['success']:.3f} at step {best['step']}, kept in "
            f"{trainer.run_dir / 'best'} (evaluate it with --agent tiny:{trainer.run_dir / 'best'})."
        )
    return summary
