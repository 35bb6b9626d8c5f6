"""Co-rewarding-I's rollout (arXiv 2508.00410 §3.2): each task and its rephrasing sampled in the same step.

``rollout.strategy: paired``: for every drawn task, `group_size` episodes of the task and `group_size` of its
rephrasing (argym.envs.rephrase), as two groups side by side (2k and 2k + 1), so the ``co_reward_data``
reward component finds both views of a question in one batch and labels each with the other's vote.
A step therefore rolls out 2 × `tasks_per_step` groups: halve `tasks_per_step` to compare with another
method at equal samples. A task that declares no rephrasing is a `ConfigError` (never the task twice).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from argym.algorithms.strategies import register_strategy
from argym.envs.rephrase import rephrased
from argym.types import Task, Trajectory

if TYPE_CHECKING:
    from argym.agents.rollout import EpisodeRunner
    from argym.algorithms.config import TrainConfig


class PairedRollout:
    """`group_size` episodes of each task and of its rephrasing, the two groups adjacent."""

    def __init__(self, engine: EpisodeRunner):
        self.engine = engine

    def run(
        self, tasks: list[Task], group_size: int, seed: int = 0
    ) -> tuple[list[Trajectory], dict[str, float]]:
        both = [view for task in tasks for view in (task, rephrased(task))]
        return self.engine.run(both, group_size=group_size, seed=seed), {}


@register_strategy("paired", streams=True)  # one `run` per step, no state between calls
def _paired(cfg: TrainConfig, engine: EpisodeRunner, policy: Any) -> PairedRollout:
    return PairedRollout(engine)
