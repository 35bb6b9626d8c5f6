"""`train/tampered`: the fraction of trajectories whose grader caught a tampered test run (SWE-v0 sentinels)."""

from __future__ import annotations

from argym.algorithms.metrics import tampered_rate
from argym.types import Trajectory


def _traj(*verdicts: dict) -> Trajectory:
    return Trajectory(
        task_id="t",
        messages=[],
        reward=0.0,
        success=False,
        turns=len(verdicts),
        terminated=True,
        truncated=False,
        infos=[{"verdict": v} for v in verdicts],
    )


def test_tampered_rate_counts_trajectories_judged_tampered() -> None:
    trajs = [
        _traj({}, {"tampered": True, "rejected": "tampered: x"}),
        _traj({"tampered": False}),
        _traj({"rejected": "tampered"}),
        Trajectory("t", [], 0.0, False, 0, True, False, infos=[{}]),
    ]
    assert tampered_rate(trajs) == 0.25
    assert tampered_rate([]) == 0.0
