"""Shared fixtures for the learner tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

# The quickstart's end-to-end bar: half its RL steps, 200 held-out tasks before and after (on this machine
# 0.267 -> 0.55 at step 50), and a gain of at least 15 points.
E2E_OVERRIDES = ["steps=50", "eval.episodes=200", "eval.every=0"]
E2E_MIN_GAIN = 0.15


@pytest.fixture(scope="session")
def quickstart_warm_policy(tmp_path_factory) -> Path:
    """The quickstart's supervised warm start, trained once (minutes) for every end-to-end learning test."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    out = tmp_path_factory.mktemp("quickstart-warm")
    Trainer(load_config(None, ["steps=0", f"out_dir={out}"])).close()
    return out / "checkpoint" / "policy"


@pytest.fixture
def quickstart_learns(quickstart_warm_policy) -> Callable[..., dict]:
    """``quickstart_learns(run_dir, extra=[])``: the quickstart's RL (with `extra` overrides) from the shared
    warm start; asserts the end-to-end bar and returns the run's summary."""
    from argym.algorithms.quickstart import run_quickstart

    def learn(run_dir: Path, extra: Sequence[str] = ()) -> dict:
        warm = ["policy.kind=hf", f"policy.path={quickstart_warm_policy}", "warm_start.steps=0"]
        summary = run_quickstart(str(run_dir), [*E2E_OVERRIDES, *warm, *extra])
        assert summary["before"]["n"] >= 200
        # 95% Wilson intervals on the same tasks; demand a clear gain
        assert summary["after"]["accuracy"] >= summary["before"]["accuracy"] + E2E_MIN_GAIN, summary
        return summary

    return learn


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
