"""The `TextEnv` contract (docs/design.md, "The environment contract"), on every registered env and a toy one."""

from __future__ import annotations

import pickle
import warnings
from dataclasses import dataclass

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import argym
from argym.envs import EnvState, ListSource, Reply, TextEnv, parse_action
from argym.registration import own_ids


class EchoEnv(TextEnv):
    """Solved by repeating the task's answer; `max_turns` tries, then truncated."""

    def __init__(self, max_turns: int = 2, **kwargs):
        super().__init__(tasks=None, max_turns=max_turns, **kwargs)

    def load_tasks(self, tasks):
        return ListSource(
            [
                argym.Task(
                    id=f"t{i}",
                    prompt=({"role": "user", "content": f"say {i}"},),
                    answer=str(i),
                    split="train" if i < 8 else "test",
                )
                for i in range(10)
            ]
        )

    def respond(self, action):
        if action["content"] == self.task.answer:
            return Reply(reward_parts={"outcome": 1.0}, terminated=True, success=True, verdict={"ok": True})
        return Reply(
            messages=[{"role": "user", "content": "no"}], reward_parts={"outcome": 0.0}, verdict={"ok": False}
        )


class CoinEnv(EchoEnv):
    """Replies with a fresh random number each step: replaying it cannot reproduce a snapshot."""

    counter = 0

    def respond(self, action):
        CoinEnv.counter += 1
        return Reply(
            messages=[{"role": "user", "content": str(CoinEnv.counter)}], reward_parts={"outcome": 0.0}
        )


class TallyEnv(EchoEnv):
    """Keeps a tally of its own that only grows (a stand-in for a workspace): replay cannot rebuild it,
    so its snapshot carries the tally and its `restore` loads it, then the base's part; "stop" is a limit
    of its own, which truncates the episode."""

    def begin(self, task):
        self.tally = 0
        return super().begin(task)

    def respond(self, action):
        self.tally += 1
        if action["content"] == "stop":
            return Reply(reward_parts={"outcome": 0.0}, truncated=True, verdict={"limit": "stop"})
        if action["content"] == "both":
            return Reply(reward_parts={"outcome": 0.0}, terminated=True, truncated=True)
        return super().respond(action)

    def snapshot(self):
        return TallyState(**vars(super().snapshot()), tally=self.tally)

    def restore(self, state):
        self.check_state(state, TallyState)
        self.tally = state.tally
        self.load_episode(state)


@dataclass
class TallyState(EnvState):
    tally: int = 0


def make_env(env_id: str, request) -> gym.Env:
    """`gym.make(env_id)`; argym/OpenEnv-v0 wraps a running server, so it gets the tests' OpenEnv server."""
    kwargs = {"url": request.getfixturevalue("openenv_server")} if env_id == "argym/OpenEnv-v0" else {}
    return gym.make(env_id, **kwargs)


@pytest.mark.parametrize("env_id", own_ids())
def test_check_env_on_every_registered_env(env_id: str, request) -> None:
    env = make_env(env_id, request)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # render_fps: text envs have no frame rate
        check_env(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", own_ids())
def test_seeded_reset_is_deterministic_and_options_pin_the_task(env_id: str, request) -> None:
    env = make_env(env_id, request)
    obs_a, info_a = env.reset(seed=123)
    task = env.unwrapped.task
    obs_b, info_b = env.reset(seed=123)
    assert (obs_a, info_a) == (obs_b, info_b)
    assert {env.reset(seed=s)[1]["task_id"] for s in range(5)} != {info_a["task_id"]}
    assert env.reset(seed=9, options={"task_id": task.id})[0] == obs_a
    assert env.reset(options={"task": task})[1]["task_id"] == task.id
    with pytest.raises(argym.ConfigError, match="argym.Task"):
        env.reset(options={"task": {"id": task.id}})


@pytest.mark.parametrize("env_id", own_ids())
def test_step_out_of_order_raises(env_id: str, request) -> None:
    env = make_env(env_id, request)
    with pytest.raises(argym.EnvStateError, match="before reset"):
        env.step("hello")
    with pytest.raises(gym.error.ResetNeeded):  # what gym.make's order check raises, too
        env.unwrapped.step("hello")
    obs, _ = env.reset(seed=0)
    while True:  # observations are append-only on the way
        previous = obs
        obs, _, terminated, truncated, _ = env.step("not it")
        assert obs[: len(previous)] == previous and len(obs) > len(previous)
        if terminated or truncated:
            break
    with pytest.raises(argym.EnvStateError, match="after the episode ended"):
        env.step("hello")


def test_observations_are_append_only() -> None:
    env = EchoEnv(max_turns=3)
    obs, _ = env.reset(seed=0)
    history = [obs]
    for action in ("a", {"role": "assistant", "content": "b"}, 7):
        obs, *_ = env.step(action)
        assert obs[: len(history[-1])] == history[-1] and len(obs) == len(history[-1]) + 2
        history.append(obs)
    obs[0]["content"] = "tampered"  # the caller's copy, not the env's
    assert env.snapshot().messages[0]["content"] != "tampered"


def test_turn_limit_truncates() -> None:
    env = EchoEnv(max_turns=2)
    env.reset(options={"task_id": "t3"})
    assert env.step("x")[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step("y")
    assert (reward, terminated, truncated, info["success"], info["turn"]) == (0.0, False, True, False, 2)
    env.reset(options={"task_id": "t3"})
    _, reward, terminated, truncated, info = env.step("3")
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)


def test_a_reply_can_truncate_the_episode_before_the_turn_limit() -> None:
    env = TallyEnv(max_turns=5)
    env.reset(options={"task_id": "t3"})
    _, reward, terminated, truncated, info = env.step("stop")
    assert (reward, terminated, truncated, info["turn"], info["verdict"]) == (
        0.0,
        False,
        True,
        1,
        {"limit": "stop"},
    )
    with pytest.raises(argym.EnvStateError, match="after the episode ended"):
        env.step("3")
    env.reset(options={"task_id": "t3"})
    assert env.step("both")[2:4] == (True, False)  # a task that is over is terminated, not truncated


def test_a_subclass_restores_its_own_state_then_the_base_part_through_the_hooks() -> None:
    env = TallyEnv(max_turns=4)
    env.reset(seed=4)
    env.step("wrong")
    env.step("again")
    state = pickle.loads(pickle.dumps(env.snapshot()))
    assert isinstance(state, TallyState) and state.tally == 2
    fresh = TallyEnv(max_turns=4)
    fresh.restore(state)  # no replay: the tally is loaded, not counted again
    assert (fresh.tally, fresh.turn, fresh.task) == (2, 2, env.task)
    assert fresh.snapshot() == env.snapshot()
    assert fresh.step(env.task.answer) == env.step(env.task.answer)
    assert fresh.reset() == env.reset()
    plain = EchoEnv(max_turns=4)
    plain.reset(seed=4)
    with pytest.raises(argym.ConfigError, match="Cannot restore"):
        TallyEnv().restore(plain.snapshot())


@pytest.mark.parametrize(
    "action, problem",
    [
        (None, "got NoneType"),
        (42, "got int"),
        ({"role": "user", "content": "x"}, "role 'user'"),
        ({"content": ["x"]}, "got list"),
    ],
)
def test_malformed_actions_are_observations(action, problem: str) -> None:
    env = EchoEnv()
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(action)
    assert (reward, terminated) == (0.0, False) and problem in info["verdict"]["error"]
    assert obs[-2] == {"role": "assistant", "content": ""} and problem in obs[-1]["content"]


def test_parse_action_keeps_tool_calls() -> None:
    calls = [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    msg, problem = parse_action({"role": "assistant", "content": None, "tool_calls": calls})
    assert problem is None and msg == {"role": "assistant", "content": "", "tool_calls": calls}


def test_snapshot_pickles_and_restores_into_a_fresh_instance() -> None:
    env = EchoEnv(max_turns=3)
    env.reset(seed=4)
    env.step("wrong")
    state = pickle.loads(pickle.dumps(env.snapshot()))
    assert isinstance(state, EnvState) and state.turn == 1 and state.actions == ["wrong"]
    fresh = EchoEnv(max_turns=3)
    fresh.restore(state)
    assert fresh.snapshot().messages == env.snapshot().messages
    assert fresh.step(env.task.answer) == env.step(env.task.answer)
    assert fresh.reset() == env.reset()


def test_restore_that_diverges_raises() -> None:
    env = CoinEnv(max_turns=3)
    env.reset(seed=0)
    env.step("x")
    with pytest.raises(argym.EnvStateError, match="not deterministic"):
        CoinEnv(max_turns=3).restore(env.snapshot())
    with pytest.raises(argym.ConfigError, match="Cannot restore"):
        EchoEnv().restore(env.snapshot())
    with pytest.raises(argym.EnvStateError):
        EchoEnv().snapshot()


def test_render_and_config_errors(capsys) -> None:
    env = EchoEnv(render_mode="ansi")
    env.reset(options={"task_id": "t1"})
    env.step("1")
    assert env.render() == "[user]\nsay 1\n\n[assistant]\n1"
    with EchoEnv(render_mode="human") as human:
        human.reset(options={"task_id": "t1"})
        human.step("1")
    assert "[assistant]\n1" in capsys.readouterr().out
    with pytest.raises(argym.ConfigError, match="render_mode"):
        EchoEnv(render_mode="rgb_array")
    with pytest.raises(argym.ConfigError, match="max_turns"):
        EchoEnv(max_turns=0)
    with pytest.raises(argym.ConfigError, match="split"):
        EchoEnv(split="dev")
