"""Fixtures of the leaderboard tests: every test gets its own store file, never the user's."""

from __future__ import annotations

from typing import Any

import pytest

import argym
from argym.stats import success_interval


@pytest.fixture(autouse=True)
def lb_db(tmp_path, monkeypatch):
    """The store path for this test, also set as $ARGYM_LEADERBOARD (for the API's and CLI's default)."""
    path = tmp_path / "leaderboard.sqlite"
    monkeypatch.setenv("ARGYM_LEADERBOARD", str(path))
    monkeypatch.delenv("ARGYM_HOME", raising=False)
    return path


def make_result(
    successes: list[bool],
    *,
    agent: str = "scripted",
    seed: int = 0,
    env_id: str = "argym/Math-v0",
    env_kwargs: dict[str, Any] | None = None,
    split: str = "test",
    samples_per_task: int = 1,
    task_hash: str = "t" * 16,
) -> dict[str, Any]:
    """A self-consistent evaluation result (as `EvalResult.to_dict()` gives it) for these outcomes."""
    k = samples_per_task
    episodes = [
        {
            "task_id": f"task#{i // k}",
            "sample": i % k,
            "success": bool(s),
            "reward": float(s),
            "turns": 1,
            "tokens": 7,
            "infra_failure": False,
        }
        for i, s in enumerate(successes)
    ]
    mean, low, high = success_interval([e["success"] for e in episodes], [e["task_id"] for e in episodes])
    return {
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs or {}),
        "split": split,
        "n": len(episodes),
        "n_tasks": len(episodes) // k,
        "samples_per_task": k,
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "mean_reward": mean,
        "infra_failures": 0,
        "seed": seed,
        "agent": agent,
        "sampling": {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 64},
        "pass_at_k": {},
        "confidence": 0.95,
        "task_hash": task_hash,
        "argym_version": argym.__version__,
        "episodes": episodes,
        "grader_versions": {"math-verify": "0.9.0"},
        "agent_info": {"kind": agent, "model": agent},
        "training_run": {},
        "git_commit": "",
        "wall_s": 0.1,
    }


@pytest.fixture
def result():
    """`make_result`, as a fixture (test modules cannot import conftest under --import-mode=importlib)."""
    return make_result
