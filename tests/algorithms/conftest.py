"""Shared fixtures for the learner tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest


@pytest.fixture
def reward_where() -> Callable:
    """``reward_where(trainer, pick)``: the trainer's rollouts give reward 1 to each trajectory for which
    ``pick(index, trajectory, group_size)`` holds. A tiny warm start solves nothing, so every group would
    be all-equal (advantage 0); this makes groups informative without training a policy first."""

    def install(trainer, pick: Callable) -> None:
        run = trainer.engine.run

        def mixed(tasks, group_size, seed):
            return [
                dataclasses.replace(t, reward=1.0) if pick(i, t, group_size) else t
                for i, t in enumerate(run(tasks, group_size=group_size, seed=seed))
            ]

        trainer.engine.run = mixed

    return install
