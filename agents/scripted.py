"""Scripted agents: the oracle (the env's known solution) and a random baseline."""

from __future__ import annotations

from typing import Any

from argym.errors import ConfigError
from argym.types import Message


class OracleAgent:
    """Acts with the env's `oracle_action()`: an upper bound, and warm-start data."""

    name = "oracle"

    def act(self, messages: list[Message], env: Any) -> str | Message:
        try:
            # a wrapper's own oracle (DecomposeReasoner) first
            action: str | Message = env.get_wrapper_attr("oracle_action")()
            return action
        except NotImplementedError:
            env_id = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
            raise ConfigError(
                f"{env_id} has no oracle (its tasks carry no known solution); evaluate another agent, "
                f"e.g. --agent random or --agent hf:PATH."
            ) from None


class RandomAgent:
    """Acts with a sample of the env's action space: a floor any policy should beat."""

    name = "random"

    def __init__(self, seed: int = 0):
        self.seed = seed
        self._seeded: set[int] = set()

    def act(self, messages: list[Message], env: Any) -> str | Message:
        space = env.unwrapped.action_space
        if id(space) not in self._seeded:
            space.seed(self.seed)
            self._seeded.add(id(space))
        action: str = space.sample()  # a `UnicodeText` space samples a string
        return action
