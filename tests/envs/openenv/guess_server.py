"""A small OpenEnv environment written with openenv-core's server classes, served by its `create_app`.

Guess a number from 1 to 20 (chosen by the reset's seed); each guess is told "higher" or "lower";
a right guess scores 1 and ends the episode, a guess that is not a number scores -0.1.

Run: python guess_server.py PORT
"""

from __future__ import annotations

import random
import re
import sys
from typing import Any

import uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class GuessAction(Action):
    guess: str


class GuessObservation(Observation):
    prompt: str


class GuessEnvironment(Environment[GuessAction, GuessObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._secret = 0
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._secret = random.Random(seed).randint(1, 20)
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(prompt="I picked a number from 1 to 20. Guess it: reply with one number.")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        found = re.search(r"-?\d+", action.guess)
        if found is None:
            return GuessObservation(prompt="That is not a number. Reply with one number.", reward=-0.1)
        guess = int(found.group())
        if guess == self._secret:
            return GuessObservation(prompt=f"Right, it was {guess}.", reward=1.0, done=True)
        return GuessObservation(prompt="higher" if guess < self._secret else "lower", reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def secret(seed: int) -> int:
    """The number the server picks for `seed` (for tests that play it right)."""
    return random.Random(seed).randint(1, 20)


app = create_app(GuessEnvironment, GuessAction, GuessObservation, env_name="guess", max_concurrent_envs=8)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
