"""Name → function tables for the learner's parts (verl's `register_policy_loss` pattern).

A config names a part ("grpo", "ppo_clip", "k3"); the learner looks the name up
here, so a new estimator or loss is one decorated function and a preset is a
config value, never an `if/elif` ladder or a subclass.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

from argym.errors import ConfigError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """A table of named functions of one kind (e.g. "advantage estimator")."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator that files `fn` under `name`; a name can be taken only once."""

        def deco(fn: F) -> F:
            if name in self._items:
                raise ValueError(
                    f"A {self.kind} named {name!r} is already registered "
                    f"({self._items[name].__module__}); pick another name."
                )
            self._items[name] = fn
            return fn

        return deco

    def get(self, name: str) -> F:
        """The function registered as `name`; an unknown name lists the close matches."""
        try:
            return self._items[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.4)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(
                f"Unknown {self.kind} {name!r}.{hint} Registered: {', '.join(self.names())}."
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
