"""What a training run shows beyond its metrics: sample trajectories, a heartbeat, and a warning when it
cannot learn.

- **Samples.** Each step, `LogConfig.samples_per_step` trajectories (spread evenly over the batch, so
  they come from different groups; picked without an RNG so a resumed run draws what a straight one
  does) go to ``samples.jsonl`` in the run directory — the bounded transcript (`argym.transcript`),
  the reward, the env's reward parts, success and the learner's advantage — and to TensorBoard's
  text tab, so "why is the reward 0" has an answer.
- **Cannot learn.** When every group's rewards are all equal for `LogConfig.zero_variance_steps`
  steps in a row, group-relative advantages are all 0 and nothing is learned: say so once, with
  what to change.
- **Heartbeat.** When the console is not a terminal (a log file, CI), rich's progress bar draws
  nothing until the end, so one plain line per step is printed instead.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from argym.transcript import transcript
from argym.types import Trajectory


def pick(n_items: int, k: int) -> list[int]:
    """`k` indices spread evenly over ``range(n_items)`` (all of them when k >= n_items)."""
    if k >= n_items:
        return list(range(n_items))
    return [i * n_items // k for i in range(k)]


def reward_parts(traj: Trajectory) -> dict[str, float]:
    """The env's reward parts summed over the episode's steps."""
    parts: dict[str, float] = defaultdict(float)
    for info in traj.infos:
        for name, value in (info.get("reward_parts") or {}).items():
            parts[str(name)] += float(value)
    return dict(parts)


def all_groups_flat(trajs: list[Trajectory]) -> bool:
    """True when every group's (scored) rewards are all equal: no group carries a learning signal."""
    groups: dict[int, set[float]] = defaultdict(set)
    for t in trajs:
        if not t.infra_failure:
            groups[t.group].add(round(float(t.reward), 9))
    return bool(groups) and all(len(v) == 1 for v in groups.values())


def silence_progress_bars() -> None:
    """No download or checkpoint-loading bars from transformers and the Hub (they flood a log file)."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # transformers is a core dependency; tolerate a trimmed install
        pass


class StepLog:
    """Writes each step's samples, warns once when the run cannot learn, prints the heartbeat.

    With `run_dir=None` it writes no samples (a data-parallel rank other than the main one).
    """

    def __init__(
        self, run_dir: Path | None, config: Any, console: Any, metrics: Any, steps: int, resume_step: int = 0
    ):
        self.path = None if run_dir is None else run_dir / "samples.jsonl"
        self.config = config  # LogConfig
        self.console = console
        self.metrics = metrics  # MetricsLog: its TensorBoard writer gets the text
        self.steps = steps
        self.flat_steps = 0
        self.warned = False
        self.warned_timeouts = False
        self.heartbeat = not console.is_terminal
        if self.heartbeat:
            silence_progress_bars()
        # a resumed run logs the steps after its checkpoint again
        if self.path is not None and self.path.exists():
            keep = [
                line
                for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= resume_step
            ]
            self.path.write_text("".join(line + "\n" for line in keep))

    def samples(self, step: int, trajs: list[Trajectory], advantages: list[float | None]) -> None:
        """Log this step's sample trajectories and check whether any group has a learning signal."""
        self._check_signal(step, trajs)
        rows = []
        for i in pick(len(trajs), self.config.samples_per_step):
            t = trajs[i]
            rows.append(
                {
                    "step": step,
                    "task_id": t.task_id,
                    "group": t.group,
                    "reward": round(float(t.reward), 6),
                    "reward_parts": reward_parts(t),
                    "success": bool(t.success),
                    "advantage": None if (a := advantages[i]) is None else round(float(a), 6),
                    "infra_failure": bool(t.infra_failure),
                    "transcript": transcript(t),
                }
            )
        if not rows or self.path is None:
            return
        with self.path.open("a") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        self.metrics.text("samples", "\n\n---\n\n".join(markdown(r) for r in rows), step)

    def _check_signal(self, step: int, trajs: list[Trajectory]) -> None:
        self.flat_steps = self.flat_steps + 1 if all_groups_flat(trajs) else 0
        if self.warned or self.flat_steps < self.config.zero_variance_steps:
            return
        self.warned = True
        rewards = sorted({round(float(t.reward), 3) for t in trajs if not t.infra_failure})
        self.console.print(
            f"warning: for {self.flat_steps} steps in a row (to step {step}) every group's samples got the "
            f"same reward (rewards seen: {', '.join(map(str, rewards[:5]))}), so every group-relative "
            "advantage is 0 and the policy learns nothing. Make the groups differ: tasks nearer the model's "
            "level (env.kwargs), a larger rollout.group_size, a higher rollout.temperature, a warm start "
            "(warm_start.steps), a shaped reward (reward.weights), or sampling.dynamic=true to redraw flat "
            "groups. samples.jsonl shows what the model wrote.",
            style="yellow",
            markup=False,
            soft_wrap=True,  # one line in a log file, whatever the console's width
        )

    def timeouts(self, step: int, metrics: dict[str, Any]) -> None:
        """Warn once when most of a step's agent programs ran past `agent.deadline_s`: each scores 0, so
        a policy slower than the deadline (a larger model, a CPU) trains on timeouts, not on its answers."""
        share = metrics.get("program/timeouts", 0.0)
        if self.warned_timeouts or share < 0.5:
            return
        self.warned_timeouts = True
        self.console.print(
            f"warning: at step {step}, {share:.0%} of the agent programs ran past agent.deadline_s and scored "
            "0 whatever they would have answered. The deadline counts wall time, the wait for the shared "
            "generator included: raise agent.deadline_s for a slower policy (perf/rollout_s shows a step's "
            "rollout time), or lower agent.concurrency.",
            style="yellow",
            markup=False,
            soft_wrap=True,
        )

    def beat(self, step: int, metrics: dict[str, Any], seconds: float) -> None:
        """One plain line per step when nobody watches the progress bar."""
        if not self.heartbeat:
            return
        shown = [f"step {step}/{self.steps}"]
        for key, name in (("train/reward", "reward"), ("train/success", "success"), ("eval/success", "eval")):
            if key in metrics:
                shown.append(f"{name} {metrics[key]:.3g}")
        shown.append(f"{seconds:.1f}s")
        self.console.print("  ".join(shown), markup=False, highlight=False, soft_wrap=True)


def markdown(row: dict[str, Any]) -> str:
    """One sample as Markdown for TensorBoard's text tab (texts in code blocks: nothing is rendered as markup)."""
    adv = "n/a" if row["advantage"] is None else f"{row['advantage']:.3g}"
    parts = ", ".join(f"{k}={v:.3g}" for k, v in row["reward_parts"].items()) or "none"
    lines = [
        f"**{row['task_id']}** (group {row['group']}): reward {row['reward']:.3g} ({parts}), "
        f"success {row['success']}, advantage {adv}",
        "",
    ]
    for m in row["transcript"]["messages"]:
        lines += [f"*{m['role']}*", "", *("    " + line for line in m["content"].splitlines() or [""]), ""]
    lines += ["*verdict*", "", "    " + json.dumps(row["transcript"]["verdict"], sort_keys=True)]
    return "\n".join(lines)
