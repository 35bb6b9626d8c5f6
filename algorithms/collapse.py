"""Collapse check for label-free training: pseudo-labels that agree more while they are right less.

Self-rewarding collapses into a self-consistent illusion (Co-rewarding, arXiv 2508.00410 §1, §4.3): the
policy learns to agree with itself, so the vote's share climbs while the pseudo-labels' accuracy falls.
Labels, where the task has them, only *measure* here: every step the label accuracy and the vote
share go in; when the mean over the last `window` steps has the accuracy at least `drop` below the run's
best `window`-step mean so far, while the share is not below the share of that best window, the run is
flagged: ``<component>/collapse`` is 1 and one warning line is logged when the flag turns on (again only
after it has cleared). Against the best window, not the one just before: on Math from a weak warm start
majority vote's label accuracy fell 0.24 → 0.11 over 30 steps, 0.02–0.05 per 5-step window, which a
comparison of adjacent windows never flags (BENCHMARKS.md, "Rewards without labels").
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class CollapseMonitor:
    """Windows of (vote share, label accuracy) per step; `update` returns ``<name>/collapse``."""

    def __init__(self, name: str, window: int = 5, drop: float = 0.1):
        self.name, self.window, self.drop = name, window, drop
        self.share: list[float] = []
        self.accuracy: list[float] = []
        self.flagged = False
        self.best: tuple[float, float] | None = None
        """(label accuracy, vote share) means of the window with the best label accuracy so far."""

    def update(self, share: float | None, accuracy: float | None) -> dict[str, float]:
        """Add one step's mean vote share and pseudo-label accuracy (None: not measurable, e.g. no gold)."""
        if share is None or accuracy is None:
            return {}
        self.share.append(share)
        self.accuracy.append(accuracy)
        w = self.window
        if len(self.accuracy) >= w:
            acc_now, share_now = _mean(self.accuracy[-w:]), _mean(self.share[-w:])
            if self.best is None or acc_now > self.best[0]:
                self.best = (acc_now, share_now)
        if len(self.accuracy) < 2 * w or self.best is None:
            return {f"{self.name}/collapse": 0.0}
        acc_before, share_before = self.best
        collapsing = share_now >= share_before and acc_before - acc_now >= self.drop
        if collapsing and not self.flagged:
            log.warning(
                "label-free collapse (%s): the pseudo-labels agree more (vote share %.2f -> %.2f) while their "
                "accuracy fell (%.2f -> %.2f) from its best %d-step window; the policy is rewarding its own "
                "consistent mistakes. Try co_reward_data or co_reward_teacher, or stop the run.",
                self.name,
                share_before,
                share_now,
                acc_before,
                acc_now,
                w,
            )
        self.flagged = collapsing
        return {f"{self.name}/collapse": float(collapsing)}


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)
