"""AgentPRM training data from given trajectories: Monte-Carlo Q targets per (state, action).

Choudhury 2025 (arXiv 2502.10325, `compute_prm_target.py`): every (state,
action) pair — here the conversation up to and including one step, as text —
gets the average outcome of all rollouts that pass through it. The paper maps
z = 2·score − 1 ∈ {−1, 1}, discounts it, averages, and maps back with (Q̂ + 1)/2:
one rollout's target is (1 + γ^k·z)/2, k the steps after the action. With γ = 1
that is the plain success rate; with γ < 1 a distant success and a distant
failure both move towards 1/2 (uncertain), where discounting the 0/1 score would
leave every failure at 0 and pull distant successes down towards it. k counts
steps to the end, γ^(T−1−t) for step t of T (the standard form; the authors'
code counts t from the start of the episode).

`QTable` accumulates sums and counts, so targets from branched rollouts
(`argym.algorithms.agent_prm`) merge with those from ordinary ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from argym.rewards.steps import Step, render_text, split_steps, step_prefix
from argym.types import Trajectory

StepSplitter = Callable[[Trajectory], list[Step]]


@dataclass
class QTable:
    """Sums and counts of outcomes per state-action text; `target(key)` is the mean in [0, 1]."""

    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, value: float, n: int = 1) -> None:
        """Add `n` outcomes summing to `value` for `key`."""
        self.sums[key] = self.sums.get(key, 0.0) + float(value)
        self.counts[key] = self.counts.get(key, 0) + int(n)

    def target(self, key: str) -> float:
        return self.sums[key] / self.counts[key]

    def examples(self) -> tuple[list[str], list[float]]:
        """(texts, targets) for `train_classifier`, in insertion order."""
        keys = list(self.sums)
        return keys, [self.target(k) for k in keys]

    def __len__(self) -> int:
        return len(self.sums)


def step_keys(traj: Trajectory, steps: Sequence[Step] | None = None) -> list[str]:
    """The state-action text of each step: what the PRM reads for it."""
    steps = split_steps(traj) if steps is None else steps
    return [render_text(step_prefix(traj, steps, j)) for j in range(len(steps))]


def discounted_target(success: bool, steps_after: int, gamma: float = 1.0) -> float:
    """One rollout's PRM target for an action `steps_after` steps before the end: (1 + γ^k·z)/2, z = ±1.

    AgentPRM's mapping (arXiv 2502.10325, `compute_prm_target.py`): the outcome z = 2·score − 1
    is discounted in [−1, 1] and mapped back to [0, 1].
    """
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}.")
    z = 1.0 if success else -1.0
    return 0.5 * (1.0 + gamma**steps_after * z)


def mc_q_targets(
    trajectories: Sequence[Trajectory],
    gamma: float = 1.0,
    table: QTable | None = None,
    splitter: StepSplitter = split_steps,
) -> QTable:
    """Average each (state, action)'s discounted target over every rollout through it; infra failures skipped."""
    if not 0 < gamma <= 1:
        raise ValueError(f"gamma must be in (0, 1], got {gamma}.")
    table = table if table is not None else QTable()
    for t in trajectories:
        if t.infra_failure:
            continue
        keys = step_keys(t, splitter(t))
        for j, key in enumerate(keys):
            table.add(key, discounted_target(bool(t.success), len(keys) - 1 - j, gamma))
    return table


def prefix_labels(
    trajectories: Sequence[Trajectory], splitter: StepSplitter = split_steps
) -> tuple[list[str], list[bool]]:
    """Every step prefix of every trajectory, labelled with the trajectory's final success (for AUC)."""
    texts, labels = [], []
    for t in trajectories:
        if t.infra_failure:
            continue
        for key in step_keys(t, splitter(t)):
            texts.append(key)
            labels.append(bool(t.success))
    return texts, labels
