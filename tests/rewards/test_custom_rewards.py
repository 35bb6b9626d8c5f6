"""A recipe's reward weights name a user's ``module:function`` beside the built-in components."""

from __future__ import annotations

import textwrap

import pytest

import argym
from argym.algorithms.config import load_config
from argym.errors import ConfigError
from argym.rewards.compose import RewardComposer, RewardConfig
from argym.rewards.custom import env_tasks
from argym.types import Task, Trajectory

USER_REWARDS = """
def brevity(traj):
    return -0.01 * len(traj.messages[-1]["content"])

def checks(traj):
    text = traj.messages[-1]["content"]
    return {"polite": float("please" in text), "short": float(len(text) < 10)}

def broken(traj):
    if "boom" in traj.messages[-1]["content"]:
        raise RuntimeError("the grader's model is down")
    return 1.0

def wrong_type(traj):
    return "high"

def exact(traj, task):
    return {"exact": float(traj.messages[-1]["content"] == task.answer), "level": float(task.meta["level"])}
"""


@pytest.fixture
def rewards_module(tmp_path, monkeypatch):
    name = f"user_rewards_{tmp_path.name}"  # unique per test: no module cached across tests
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_REWARDS))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def traj(text: str, reward: float = 1.0) -> Trajectory:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]
    return Trajectory("t", messages, reward, reward > 0, 1, True, False)


def test_callable_rewards_score_and_log_under_their_names(rewards_module):
    m = rewards_module
    weights = {"outcome": 1.0, f"{m}:brevity": 1.0, f"{m}:checks": 0.5}
    shaped, metrics = RewardComposer(RewardConfig(weights=weights))(
        [traj("please"), traj("a much longer answer")]
    )
    assert shaped[0].reward == pytest.approx(1.0 - 0.06 + 0.5 * 2)
    assert shaped[1].reward == pytest.approx(1.0 - 0.20 + 0.5 * 0)
    assert metrics[f"reward/{m}:brevity"] == pytest.approx(-0.13)
    assert metrics[f"reward/{m}:checks/polite"] == 0.5 and metrics[f"reward/{m}:checks/short"] == 0.5
    assert metrics[f"reward/{m}:checks"] == 1.0


def test_a_failing_reward_is_an_infrastructure_failure_not_a_crash(rewards_module):
    m = rewards_module
    composer = RewardComposer(RewardConfig(weights={"outcome": 1.0, f"{m}:broken": 1.0}))
    shaped, metrics = composer([traj("fine"), traj("boom")])
    assert [t.infra_failure for t in shaped] == [False, True]
    assert shaped[0].reward == 2.0
    assert metrics[f"reward/{m}:broken_infra_failures"] == 1 and metrics["reward/infra_failures"] == 1
    composer = RewardComposer(RewardConfig(weights={"outcome": 1.0, f"{m}:wrong_type": 1.0}))
    shaped, metrics = composer([traj("fine")])
    assert shaped[0].infra_failure and metrics["reward/infra_failures"] == 1


def test_a_recipe_names_a_callable_reward(rewards_module, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"reward:\n  weights:\n    outcome: 1.0\n    {rewards_module}:brevity: 0.1\n")
    assert load_config(recipe).reward.weights == {"outcome": 1.0, f"{rewards_module}:brevity": 0.1}
    recipe.write_text(f"reward:\n  weights:\n    {rewards_module}:no_such_fn: 0.1\n")
    with pytest.raises(ConfigError, match="has no function 'no_such_fn'"):
        load_config(recipe)
    recipe.write_text("reward:\n  weights:\n    not_a_module_xyz:fn: 0.1\n")
    with pytest.raises(ConfigError, match="cannot import 'not_a_module_xyz'"):
        load_config(recipe)


def test_a_reward_that_takes_the_task_gets_its_answer_and_meta(rewards_module):
    """TRL and verifiers hand reward functions the dataset's columns; argym hands the `Task`."""
    m = rewards_module
    tasks = {"t": Task("t", ({"role": "user", "content": "q"},), answer="42", meta={"level": 3})}
    composer = RewardComposer(
        RewardConfig(weights={"outcome": 0.0, f"{m}:exact": 1.0}), tasks=tasks.__getitem__
    )
    shaped, metrics = composer([traj("42"), traj("41")])
    assert [t.reward for t in shaped] == [4.0, 3.0] and metrics[f"reward/{m}:exact/exact"] == 0.5
    with pytest.raises(ConfigError, match="takes the task"):  # no lookup: said when the composer is built
        RewardComposer(RewardConfig(weights={f"{m}:exact": 1.0}))


def test_the_run_env_tasks_are_found_by_id():
    tasks = env_tasks("argym/Math-v0", {"tasks": "arithmetic(digits=2,ops=+,terms=2)"})
    with argym.make("argym/Math-v0", tasks="arithmetic(digits=2,ops=+,terms=2)") as env:
        _, info = env.reset(seed=3)
        assert tasks(info["task_id"]) == env.unwrapped.task


def test_a_callable_reward_weight_is_an_override(rewards_module, tmp_path):
    """`reward.weights.MODULE:fn=0.5` on the command line: refused before with a message about key=value.
    A module inside a package keeps its dots (they are not config sections)."""
    m = rewards_module
    package = tmp_path / f"pkg_{m}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "scores.py").write_text("def one(traj):\n    return 1.0\n")
    cfg = load_config(
        None,
        [
            f"reward.weights.{m}:brevity=0.5",
            "reward.weights.outcome=0",
            f"reward.weights.pkg_{m}.scores:one=2",
        ],
    )
    assert cfg.reward.weights == {"outcome": 0, f"{m}:brevity": 0.5, f"pkg_{m}.scores:one": 2}
