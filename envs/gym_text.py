"""`argym/Gymnasium-v0`: any Gymnasium env whose actions are text, run as an argym text env.

A text game from another package (a `gym.Env` taking a string action) keeps its
own loop: this env resets it, passes each assistant turn's text to its `step`,
and turns what it returns into argym's conversation and info, so `argym eval`,
`argym train` and the rollout engine run it as they run argym's own envs.

- Observations: a string is the next user message; a list of chat messages is
  either the whole conversation so far (the env's own, growing) or only the new
  messages; either way the messages not yet shown are appended, without the
  env's echo of the assistant's turn. Anything else is refused at reset with
  what to do (an `ObservationWrapper` that writes text).
- Reward: the step's reward, as the reward part ``reward``.
- ``terminated``/``truncated``: the env's own (its registered
  ``max_episode_steps`` included); ``max_turns`` is argym's bound above them.
- Success (the metric `argym eval` counts): ``info["success"]``, else
  ``info["is_success"]`` (Gymnasium's convention), else ``info["won"]``; an env
  that says none of them succeeds when the episode terminated with a positive
  return.
- Tasks are seeds: task ``gym#N`` resets the env with ``seed=N`` (a procedural
  source: train and test are disjoint seed sets, the test set its first
  ``test_size``). An env that ignores its seed still runs; its test split is
  then not a fixed task set.
- An oracle: the env's own ``oracle_action()`` if it has one (the ``oracle``
  agent and the warm start use it); otherwise train with ``warm_start.steps=0``.

Example::

    env = argym.make("my_games:Guess-v0")       # a plain gym.Env: argym.make runs it through this adapter
    env = argym.make("argym/Gymnasium-v0", env="my_games:Guess-v0", difficulty=2)  # the same, by name
    obs, info = env.reset(seed=0)   # [{"role": "user", "content": <the game's first observation>}]
    obs, reward, terminated, truncated, info = env.step("50")
    # info["reward_parts"] == {"reward": <the game's reward>}; info["verdict"]["info"]: the game's info
"""

from __future__ import annotations

import json
import math
from typing import Any

import gymnasium as gym

from argym.envs.base import Reply, TextEnv
from argym.envs.tasks import ProceduralSource, TaskSource
from argym.errors import ConfigError
from argym.types import Message, Task

SUCCESS_KEYS = ("success", "is_success", "won")
"""The info keys read as the episode's pass/fail, in this order."""


def seed_task(index: int) -> Task:
    """Task ``gym#index``: reset the wrapped env with ``seed=index``."""
    return Task(
        id="", prompt=({"role": "user", "content": f"episode with seed {index}"},), meta={"seed": index}
    )


class GymTextEnv(TextEnv):
    """The Gymnasium env `env` (an id, ``MODULE:ID`` too), made with `env_kwargs`, as a text env.

    `max_turns`: argym's bound on the episode (the env's own limits apply first); when the env's
    constructor takes a ``max_turns`` of its own, a value given here is passed on to it too.
    `test_size`: how many seeds the test split holds.
    """

    def __init__(
        self,
        env: str | None = None,
        max_turns: int | None = None,
        test_size: int = 100,
        split: str = "train",
        render_mode: str | None = None,
        executors: Any = None,
        **env_kwargs: Any,
    ):
        from argym.registration import checked_kwargs, creator, resolve

        if env is None:  # a default, so that gym.make says this rather than a bare TypeError
            raise ConfigError(
                "argym/Gymnasium-v0 needs the kwarg env, the id of a Gymnasium env whose actions are text: "
                'argym.make("argym/Gymnasium-v0", env="my_games:Guess-v0") (or make that id directly).'
            )
        self.env_id = env
        inner_id = resolve(env)
        if max_turns is not None and "max_turns" in _param_names(creator(env)):
            env_kwargs["max_turns"] = max_turns
        # its passive checker stays off, as for argym's envs: a text game's `Text` space rarely admits every reply
        self.inner = gym.make(inner_id, disable_env_checker=True, **checked_kwargs(env, env_kwargs))
        _check_text_actions(env, self.inner.action_space)
        limit = self.inner.spec.max_episode_steps if self.inner.spec is not None else None
        self.test_size = int(test_size)
        super().__init__(
            split=split,
            max_turns=max_turns or limit or 1000,
            render_mode=render_mode,
            executors=executors,
        )
        self._shown: list[Message] = []  # the env's last observation, as messages (to find what is new)
        self._return = 0.0

    # ---- TextEnv hooks ---------------------------------------------------------------
    def load_tasks(self, tasks: Any) -> TaskSource:
        return ProceduralSource("gym", seed_task, test_size=self.test_size)

    def begin(self, task: Task) -> list[Message]:
        obs, _ = self.inner.reset(seed=int(task.meta["seed"]))
        self._shown, self._return = [], 0.0
        return self._new_messages(obs, action=None)

    def respond(self, action: Message) -> Reply:
        text = action.get("content") or ""
        obs, reward, terminated, truncated, info = self.inner.step(text)
        reward = float(reward)
        self._return += reward
        info = info if isinstance(info, dict) else {}
        said = next((info[k] for k in SUCCESS_KEYS if isinstance(info.get(k), (bool, int))), None)
        success = bool(said) if said is not None else bool(terminated) and self._return > 0
        return Reply(
            messages=self._new_messages(obs, action=text),
            reward_parts={"reward": reward if math.isfinite(reward) else 0.0},
            terminated=bool(terminated),
            truncated=bool(truncated),
            success=success,
            verdict={"info": _plain(info), "return": self._return},
            infra_failure=bool(info.get("infra_failure", False)) or not math.isfinite(reward),
        )

    def oracle_action(self) -> str | Message:
        """The wrapped env's own `oracle_action()`, if it has one."""
        oracle = getattr(self.inner.unwrapped, "oracle_action", None)
        if oracle is None:
            raise NotImplementedError(f"{self.env_id} has no oracle_action().")
        action: str | Message = oracle()
        return action

    def close(self) -> None:
        self.inner.close()
        super().close()

    # ---- observations ----------------------------------------------------------------
    def _new_messages(self, obs: Any, action: str | None) -> list[Message]:
        """The messages of `obs` the conversation does not hold yet (see the module docstring)."""
        if isinstance(obs, str):
            return [{"role": "user", "content": obs}] if obs else []
        if isinstance(obs, (list, tuple)) and all(_is_message(m) for m in obs):
            messages: list[Message] = [dict(m) for m in obs]  # type: ignore[misc]
            seen, self._shown = self._shown, messages
            new = messages[len(seen) :] if seen and messages[: len(seen)] == seen else messages
            if new and action is not None and new[0]["role"] == "assistant" and new[0]["content"] == action:
                new = new[1:]  # the env's echo of the assistant's turn, already in the conversation
            return new
        raise ConfigError(
            f"{self.env_id} returned a {type(obs).__name__} observation; argym reads a string or a list of "
            f"chat messages ({{'role': ..., 'content': ...}}). Wrap the env in a gymnasium.ObservationWrapper "
            f"that writes its observation as text."
        )


def _is_message(m: Any) -> bool:
    return isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)


def _plain(info: dict[str, Any]) -> dict[str, Any]:
    """`info` as plain JSON values (a log writer and a leaderboard take it as it stands)."""
    out: dict[str, Any] = json.loads(json.dumps(info, default=repr), parse_constant=lambda _: None)
    return out


def _param_names(make: Any) -> set[str]:
    import inspect

    target = make.__init__ if inspect.isclass(make) else make
    return set(inspect.signature(target).parameters)


def _check_text_actions(env_id: str, space: Any) -> None:
    """Refuse an env whose actions are numbers or arrays: argym's agents write text."""
    from gymnasium import spaces

    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)):
        raise ConfigError(
            f"{env_id}'s actions are {space}, not text: argym trains agents that write text, so it runs "
            f"Gymnasium envs whose action space is text (gymnasium.spaces.Text, argym.envs.UnicodeText)."
        )
