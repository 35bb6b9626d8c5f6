"""A plain Gymnasium text env trains as it is (issue 44, item 10): `argym.make` runs it through the
`argym/Gymnasium-v0` adapter, and `argym eval` and `argym train` take its own id from a scratch directory.
The games are tests/envs/text_games.py: plain `gym.Env`s, no argym base class."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import argym

from ..tiny_run import TINY_POLICY

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "argym.cli"]


@pytest.fixture
def games(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """An argym command run in `cwd` (outside the repository) with the games' folder on the Python path."""
    env = {**os.environ, "PYTHONPATH": str(HERE), "OMP_NUM_THREADS": "1"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def test_string_observations_become_user_messages_and_the_game_grades(games):
    env = argym.make("text_games:GuessNumber-v0", high=8)
    assert type(env.unwrapped).__name__ == "GymTextEnv"
    obs, info = env.reset(seed=3)
    assert obs == [{"role": "user", "content": "Guess my number from 1 to 8. Reply with the number only."}]
    game = env.unwrapped.inner.unwrapped
    wrong = str(game.secret % 8 + 1)
    obs, reward, terminated, truncated, info = env.step(wrong)
    assert obs[1:] == [
        {"role": "assistant", "content": wrong},
        {"role": "user", "content": obs[-1]["content"]},
    ]
    assert obs[-1]["content"] in ("Higher.", "Lower.") and reward == 0.0 and not (terminated or truncated)
    assert info["success"] is False and info["reward_parts"] == {"reward": 0.0}
    obs, reward, terminated, truncated, info = env.step(str(game.secret))
    assert (obs[-1]["content"], reward, terminated, info["success"]) == ("Correct!", 1.0, True, True)
    assert info["verdict"]["info"] == {"won": True}
    env.close()


def test_the_games_own_time_limit_truncates(games):
    env = argym.make("text_games:GuessNumber-v0", high=1000)
    env.reset(seed=0)
    for turn in range(6):
        _, _, terminated, truncated, info = env.step("0")
        assert terminated is False and truncated is (turn == 5) and info["success"] is False
    env.close()


def test_message_observations_are_not_repeated_and_pass_gymnasiums_check(games):
    from gymnasium.utils.env_checker import check_env

    env = argym.make("text_games:Spell-v0")
    obs, _ = env.reset(seed=1)
    game = env.unwrapped.inner.unwrapped
    obs, reward, terminated, *_ = env.step("nope")
    assert obs == game.messages and reward == 0.0 and not terminated  # the game's conversation, once
    obs, reward, terminated, _, info = env.step(env.unwrapped.oracle_action())
    assert obs == game.messages and reward == 1.0 and terminated and info["success"] is True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env.unwrapped)
    env.close()


def test_an_env_whose_actions_are_not_text_is_refused_saying_why(games):
    with pytest.raises(argym.ConfigError, match=r"actions are Discrete\(2\), not text"):
        argym.make("text_games:Arm-v0")
    with pytest.raises(argym.ConfigError, match="needs the kwarg env"):
        argym.make("argym/Gymnasium-v0")


def test_argym_eval_runs_a_plain_gymnasium_game_by_its_own_id(tmp_path):
    out = cli(
        "eval",
        "text_games:GuessNumber-v0",
        "--agent",
        "oracle",
        "--episodes",
        "6",
        "--out",
        "o.json",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "o.json").read_text())
    assert result["env_id"] == "text_games:GuessNumber-v0" and result["mean"] == 1.0 and result["n"] == 6
    turns = result["episodes"][0]["transcript"]["messages"]
    assert turns[0]["content"].startswith("Guess my number") and turns[-1]["content"] == "Correct!"
    assert "UserWarning" not in out.stderr  # the game's `Text` space does not admit "!": no checker noise
    out = cli(
        "eval", "text_games:Spell-v0", "--agent", "random", "--episodes", "4", "--out", "r.json", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "r.json").read_text())["mean"] == 0.0  # random text spells nothing


def test_argym_train_trains_a_plain_gymnasium_game(tmp_path):
    run = tmp_path / "run"
    out = cli(
        "train",
        "env.id=text_games:GuessNumber-v0",
        "env.kwargs.high=8",
        *TINY_POLICY,
        *["warm_start.tasks=8", "warm_start.batch_size=8", "steps=1", "eval.episodes=2"],
        *["rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=4"],
        f"out_dir={run}",
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Warm start: 2 steps on 8 oracle trajectories" in out.stdout  # the game's own oracle_action
    assert json.loads((run / "summary.json").read_text())["steps"] == 1
    [step] = [
        json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"train/' in line
    ]
    assert step["step"] == 1 and step["train/trajectories"] == 4.0
    sample = json.loads((run / "samples.jsonl").read_text().splitlines()[0])
    first = sample["transcript"]["messages"][0]["content"]
    assert sample["task_id"].startswith("gym#") and first.startswith("Guess my number from 1 to 8")
