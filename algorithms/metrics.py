"""Run metrics: JSON lines (the record), TensorBoard (to watch), a learning-curve PNG (to show)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def tampered_rate(trajectories: list[Any]) -> float:
    """The fraction of trajectories whose grader found the test run tampered with (``verdict["tampered"]``,
    SWE-v0's sentinels): reward hacking caught, worth watching as training pushes on the reward."""
    if not trajectories:
        return 0.0
    hit = [any((info.get("verdict") or {}).get("tampered") is True for info in t.infos) for t in trajectories]
    return sum(hit) / len(trajectories)


class MetricsLog:
    """Appends one JSON object per step to `metrics.jsonl` and mirrors scalars to TensorBoard."""

    def __init__(self, run_dir: Path, resume_step: int = 0, tensorboard: bool = True):
        self.path = run_dir / "metrics.jsonl"
        self._truncate_after(resume_step)
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resume_step + 1)
            except ImportError:  # tensorboard is a core dependency; tolerate a trimmed install
                self._tb = None

    def _truncate_after(self, step: int) -> None:
        """On resume, drop lines logged after the checkpoint (they will be logged again)."""
        if not self.path.exists():
            return
        keep = [r for r in self.records() if r.get("step", 0) <= step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in keep))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        row = {"step": step, **metrics}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def text(self, tag: str, markdown: str, step: int) -> None:
        """Markdown for TensorBoard's text tab (the sample trajectories)."""
        if self._tb is not None:
            self._tb.add_text(tag, markdown, step)
            self._tb.flush()

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def plot_learning_curve(records: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """Training success per step (and its moving average) with the held-out evaluations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(r["step"], r["train/success"]) for r in records if "train/success" in r]
    evals = [(r["step"], r["eval/success"]) for r in records if "eval/success" in r]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    if train:
        xs, ys = zip(*train)
        ax.plot(xs, ys, color="tab:blue", alpha=0.3, lw=1, label="train success (per step)")
        w = max(1, len(ys) // 15)
        avg = [
            sum(ys[max(0, i - w + 1) : i + 1]) / len(ys[max(0, i - w + 1) : i + 1]) for i in range(len(ys))
        ]
        ax.plot(xs, avg, color="tab:blue", lw=2, label=f"train success ({w}-step mean)")
    if evals:
        xs, ys = zip(*evals)
        ax.plot(xs, ys, "o-", color="tab:red", lw=2, label="held-out accuracy (greedy)")
    ax.set_xlabel("RL step")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
