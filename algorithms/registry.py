"""Name → function tables for the learner's parts (verl's `register_policy_loss` pattern).

A config names a part ("grpo", "ppo_clip", "k3"); the learner looks the name up
here, so a new estimator or loss is one decorated function and a preset is a
config value, never an `if/elif` ladder or a subclass.

The learner's four tables live here, not beside their (torch) implementations:
each lists its built-in names with the module that registers them, so a config
checks a name without importing torch (`Registry.check`), and `get` imports
that module on first use.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from argym.errors import ConfigError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """A table of named functions of one kind (e.g. "advantage estimator")."""

    def __init__(self, kind: str, builtins: Mapping[str, str] | None = None):
        """`builtins`: built-in name → the module whose import registers it (imported by `get`)."""
        self.kind = kind
        self._items: dict[str, F] = {}
        self._builtins = dict(builtins or {})

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator that files `fn` under `name`; a name can be taken only once."""

        def deco(fn: F) -> F:
            owner = self._items[name].__module__ if name in self._items else self._builtins.get(name)
            if owner is not None and (name in self._items or fn.__module__ != owner):
                raise ValueError(
                    f"A {self.kind} named {name!r} is already registered ({owner}); pick another name."
                )
            self._items[name] = fn
            return fn

        return deco

    def get(self, name: str) -> F:
        """The function registered as `name`; an unknown name lists the close matches."""
        self.check(name)
        if name not in self._items:
            importlib.import_module(self._builtins[name])
        return self._items[name]

    def check(self, name: str) -> None:
        """Raise a `ConfigError` naming the close matches unless `name` is registered or built in."""
        if name not in self:
            close = difflib.get_close_matches(name, self.names(), n=3, cutoff=0.4)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise ConfigError(f"Unknown {self.kind} {name!r}.{hint} Registered: {', '.join(self.names())}.")

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._builtins))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._builtins


def _builtins(module: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, f"argym.algorithms.{module}")


ADVANTAGES: Registry = Registry(
    "advantage estimator",
    _builtins(
        "advantages", "grpo", "drgrpo", "rloo", "reinforce++", "reinforce++_baseline", "returns", "gae"
    ),
)
POLICY_LOSSES: Registry = Registry(
    "policy loss",
    {**_builtins("losses", "ppo_clip", "gspo", "gspo_token"), **_builtins("r3l.credit", "opmd")},
)
KL_ESTIMATORS: Registry = Registry("KL estimator", _builtins("losses", "k1", "k2", "k3"))
AGGREGATIONS: Registry = Registry(
    "loss aggregation mode",
    _builtins("losses", "token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"),
)
