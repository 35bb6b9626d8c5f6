"""Gymnasium spaces for conversations and free text.

gymnasium's `Text` space only admits a fixed charset, which rejects code and
most of unicode; argym's actions are arbitrary strings (or assistant message
dicts), and observations are lists of chat messages.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Space

ROLES = ("system", "user", "assistant", "tool")
# What `sample()` draws from: printable ASCII (code, LaTeX) plus a few non-ASCII letters.
_SAMPLE_CHARS = string.printable + "αβγπ∑√é中文"


class UnicodeText(Space[str]):
    """Any unicode string up to `max_length` characters."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None):
        self.max_length = max_length
        super().__init__(shape=None, dtype=None, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(0, min(self.max_length, 64) + 1))
        idx = self.np_random.integers(0, len(_SAMPLE_CHARS), size=n)
        return "".join(_SAMPLE_CHARS[i] for i in idx)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length


class Conversation(Space[list]):
    """A list of OpenAI-style chat messages (dicts with `role` and `content`)."""

    def __init__(self, seed: int | np.random.Generator | None = None):
        self._text = UnicodeText(max_length=256)
        super().__init__(shape=None, dtype=None, seed=seed)

    def seed(self, seed: int | None = None) -> int | list[int] | dict:
        out = super().seed(seed)
        self._text.seed(int(self.np_random.integers(2**31)))
        return out

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list):
            return False
        for m in x:
            if not isinstance(m, dict) or m.get("role") not in ROLES:
                return False
            if not isinstance(m.get("content", ""), str):
                return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> list:
        return [{"role": "user", "content": self._text.sample()}]

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "Conversation()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Conversation)
