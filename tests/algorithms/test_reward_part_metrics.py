"""`env/<part>` and `env/<part>_coverage`: what an env's reward parts paid, and on how many episodes."""

from __future__ import annotations

import pytest

from argym.algorithms.metrics import reward_part_metrics
from argym.types import Trajectory


def _traj(*parts: dict) -> Trajectory:
    return Trajectory(
        "t", [], 0.0, False, len(parts), True, False, infos=[{"reward_parts": p} for p in parts]
    )


def test_reward_parts_are_summed_per_episode_and_their_coverage_counted() -> None:
    trajs = [
        _traj({"outcome": 0.0, "process": 0.0}, {"outcome": 1.0, "process": 0.5}),  # parts over turns add up
        _traj({"outcome": 0.0, "process": 0.0}),
        _traj({"outcome": 1.0}),  # a part it does not report counts as 0
        Trajectory("t", [], 0.0, False, 0, True, False, infos=[{}]),
    ]
    m = reward_part_metrics(trajs)
    assert m["env/process"] == pytest.approx(0.125) and m["env/process_coverage"] == 0.25
    assert m["env/outcome"] == 0.5 and m["env/outcome_coverage"] == 0.5
    assert reward_part_metrics([Trajectory("t", [], 0.0, False, 0, True, False)]) == {}
