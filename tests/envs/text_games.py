"""Two small text games written as plain `gymnasium.Env`s, as another package would write them (no argym base
class): the Gymnasium adapter's tests (tests/envs/test_gym_text.py) run them through `argym eval` and `argym train`.

- ``text_games:GuessNumber-v0``: guess a number from 1 to `high`; the game answers "Higher." or "Lower."; string
  observations, reward 1 on the right number, ``info["won"]``; at most 6 guesses (Gymnasium's TimeLimit).
- ``text_games:Spell-v0``: spell a word backwards; observations are the whole conversation as chat messages
  (the game's own echo of each reply included), two tries.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

WORDS = ("gym", "agent", "token", "reward", "policy", "sample")


class GuessNumber(gym.Env):
    """Guess a number from 1 to `high`: "Higher." or "Lower." after each wrong guess."""

    metadata = {"render_modes": []}

    def __init__(self, high: int = 20):
        self.high = high
        self.action_space = spaces.Text(max_length=16)
        self.observation_space = spaces.Text(max_length=200)
        self.secret, self.lo, self.hi = 0, 1, high

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.secret = int(self.np_random.integers(1, self.high + 1))
        self.lo, self.hi = 1, self.high
        return f"Guess my number from 1 to {self.high}. Reply with the number only.", {}

    def step(self, action: str):
        try:
            guess = int(action.strip())
        except ValueError:
            return "That is not a number. Reply with the number only.", 0.0, False, False, {"won": False}
        if guess == self.secret:
            return "Correct!", 1.0, True, False, {"won": True}
        if guess < self.secret:
            self.lo = max(self.lo, guess + 1)
            return "Higher.", 0.0, False, False, {"won": False}
        self.hi = min(self.hi, guess - 1)
        return "Lower.", 0.0, False, False, {"won": False}

    def oracle_action(self) -> str:
        """Binary search: the middle of what is still possible."""
        return str((self.lo + self.hi) // 2)


class Spell(gym.Env):
    """Spell a word backwards; the observation is the conversation so far, as chat messages."""

    metadata = {"render_modes": []}

    def __init__(self, tries: int = 2):
        self.tries = tries
        self.action_space = spaces.Text(max_length=64)
        self.observation_space = spaces.Sequence(spaces.Dict({}))  # chat messages (dicts)
        self.word, self.messages, self.left = "", [], tries

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.word = WORDS[int(self.np_random.integers(len(WORDS)))]
        self.messages = [
            {"role": "system", "content": "You spell words backwards."},
            {"role": "user", "content": f"Spell {self.word!r} backwards."},
        ]
        self.left = self.tries
        return list(self.messages), {}

    def step(self, action: str):
        right = action.strip() == self.word[::-1]
        self.left -= 1
        reply = "Right." if right else ("Wrong, try again." if self.left else "Wrong.")
        self.messages += [{"role": "assistant", "content": action}, {"role": "user", "content": reply}]
        return list(self.messages), float(right), right or not self.left, False, {"success": right}

    def oracle_action(self) -> str:
        return self.word[::-1]


class Arm(gym.Env):
    """Not a text game: its actions are numbers (argym refuses it, saying why)."""

    def __init__(self):
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Discrete(1)


for _id, _cls, _steps in (
    ("GuessNumber-v0", GuessNumber, 6),
    ("Spell-v0", Spell, None),
    ("Arm-v0", Arm, None),
):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls, max_episode_steps=_steps)
