"""Run metrics: JSON lines (the record), TensorBoard (to watch; W&B too when asked), a learning-curve PNG (to show)."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

from argym.algorithms.step_log import reward_parts
from argym.types import Trajectory


def tampered_rate(trajectories: list[Any]) -> float:
    """The fraction of trajectories whose grader found the test run tampered with (``verdict["tampered"]``,
    SWE-v0's sentinels): reward hacking caught, worth watching as training pushes on the reward."""
    if not trajectories:
        return 0.0
    hit = [any((info.get("verdict") or {}).get("tampered") is True for info in t.infos) for t in trajectories]
    return sum(hit) / len(trajectories)


def reward_part_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """Per reward part an env reports (``info["reward_parts"]``, e.g. the Decomposer's `process`): its mean
    per episode (`env/<part>`) and its coverage, the share of episodes where it is not 0
    (`env/<part>_coverage`). A dense reward that is 0 on almost every episode is as sparse as the outcome."""
    per_traj = [reward_parts(t) for t in trajectories]
    names = sorted({k for parts in per_traj for k in parts})
    n = max(len(per_traj), 1)
    out = {}
    for k in names:
        out[f"env/{k}"] = sum(p.get(k, 0.0) for p in per_traj) / n
        out[f"env/{k}_coverage"] = sum(p.get(k, 0.0) != 0.0 for p in per_traj) / n
    return out


class MetricsLog:
    """Appends one JSON object per step to `metrics.jsonl` and mirrors scalars to TensorBoard.

    With `run_dir=None` it writes nothing: a data-parallel rank other than the main one logs nothing of
    its own (the main process logs the gathered step), and a scratch dir would outlive a killed rank.
    """

    def __init__(
        self, run_dir: Path | None, resume_step: int = 0, tensorboard: bool = True, wandb: Any = None
    ):
        """`wandb`: a `WandbLog` (algorithms/wandb_log.py) that mirrors the scalars too, or None."""
        self.path = None if run_dir is None else run_dir / "metrics.jsonl"
        self._wandb = wandb
        self._truncate_after(resume_step)
        self._tb = None
        if tensorboard and run_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resume_step + 1)
            except ImportError:  # tensorboard is a core dependency; tolerate a trimmed install
                self._tb = None

    def _truncate_after(self, step: int) -> None:
        """On resume, drop lines logged after the checkpoint (they will be logged again)."""
        if self.path is None or not self.path.exists():
            return
        keep = [r for r in self.records() if r.get("step", 0) <= step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in keep))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        if self.path is None:
            return
        row = {"step": step, **metrics}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(step, metrics)

    def text(self, tag: str, markdown: str, step: int) -> None:
        """Markdown for TensorBoard's text tab (the sample trajectories)."""
        if self._tb is not None:
            self._tb.add_text(tag, markdown, step)
            self._tb.flush()

    def records(self) -> list[dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.close()
            self._wandb = None


def curve_title(cfg: Any) -> str:
    """The learning curve's title from a `TrainConfig`: env (and its task set), algorithm, model."""
    tasks = cfg.env.kwargs.get("tasks", "")
    model = "tiny policy" if cfg.policy.kind == "tiny" else str(cfg.policy.path)
    algo = (cfg.algo or cfg.algorithm.advantage).upper()
    return f"{cfg.env.id} {tasks}".strip() + f" · {algo} · {model}"


def learning_curve_figure(records: list[dict[str, Any]], title: str = "") -> Any:
    """Training success per step (and its moving average) with the held-out evaluations, as a figure.

    Steps are whole numbers on the axis; an evaluation at step 0 (after the warm start, before RL) is its
    own marked point; the y axis runs a little past 0 and 1 so lines lying on them stay visible.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    train = [(r["step"], r["train/success"]) for r in records if "train/success" in r]
    evals = [(r["step"], r["eval/success"]) for r in records if "eval/success" in r]
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    if train:
        xs, ys = zip(*train)
        ax.plot(
            xs, ys, color="tab:blue", alpha=0.3, lw=1, label="train: success of the sampled groups, per step"
        )
        w = max(1, len(ys) // 15)
        avg = [
            sum(ys[max(0, i - w + 1) : i + 1]) / len(ys[max(0, i - w + 1) : i + 1]) for i in range(len(ys))
        ]
        if w > 1:
            ax.plot(xs, avg, color="tab:blue", lw=2, label=f"train: the same, mean of the last {w} steps")
    if evals:
        xs, ys = zip(*evals)
        ax.plot(xs, ys, "o-", color="tab:red", lw=2, label="held-out test tasks: success, greedy decoding")
        start = [(x, y) for x, y in evals if x == 0]
        if start:
            ax.plot(
                *zip(*start),
                "D",
                color="black",
                ms=7,
                zorder=5,
                label="step 0: after the warm start, before RL",
            )
    steps = [x for x, _ in train + evals] or [0]
    ax.set_xlim(min(steps) - 0.5, max(max(steps), 1) + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("RL step")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.04, 1.04)  # a curve at 0 or 1 is not hidden under the frame
    ax.grid(alpha=0.3)
    if train or evals:
        ax.legend(loc="best", fontsize=8, framealpha=0.9)
    if title:
        ax.set_title(textwrap.fill(title, 80), fontsize=10)
    fig.tight_layout()
    return fig


def plot_learning_curve(records: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """`learning_curve_figure`, saved as a PNG at `path`."""
    import matplotlib.pyplot as plt

    fig = learning_curve_figure(records, title)
    fig.savefig(path)
    plt.close(fig)
    return path
