"""Name → object tables: the one plug-in mechanism of argym (verl's `register_policy_loss` pattern).

A config names a part ("grpo", "r3l", "format", "docker"); the code looks the name
up in that kind's `Registry`, so a new part is one decorated function or class in
the user's own module, never an `if/elif` ladder, a hard-coded tuple or a subclass.
An unknown name fails with the close matches and every registered name.

This module imports nothing of argym but its errors, so every layer (envs, rewards,
agents, algorithms) can hold a registry without pulling torch or a higher layer in.
`catalog()` lists every kind and its names (`argym plugins`); docs/design.md,
"Plug-in points", lists the registries and shows how to add to one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from argym.errors import ConfigError, did_you_mean

T = TypeVar("T")

_ALL: dict[str, Registry[Any]] = {}
"""Every registry by kind, in creation order (what `catalog` lists)."""

BUILTIN_MODULES = (
    "argym.envs.sandbox",
    "argym.envs.math.env",
    "argym.envs.code.tasks",
    "argym.envs.toolcall.tools",
    "argym.envs.toolcall.env",
    "argym.envs.support.user",
    "argym.envs.swe.workspace",
    "argym.agents.spec",
    "argym.rewards.compose",
    "argym.rewards.prm",
    "argym.algorithms.advantages",
    "argym.algorithms.losses",
    "argym.algorithms.presets",
    "argym.algorithms.strategies",
)
"""Modules whose import registers argym's own parts (`catalog` imports them first)."""


def unknown_name(name: str, known: list[str], what: str) -> str:
    """``"Unknown <what> 'x'. Did you mean: y? Registered: a, b."``: the one wording of a bad name."""
    return f"Unknown {what} {name!r}.{did_you_mean(name, known)} Registered: {', '.join(known) or '(none)'}."


class Registry(Generic[T]):
    """A table of named parts of one kind (e.g. "rollout strategy"); a user's module can add to it.

    `builtins` (built-in name → the module whose import registers it) lets a table list and check
    argym's own names before that module is imported (the learner's parts live beside torch code, and
    reading a recipe must not import torch); `get` imports the module on first use.
    """

    def __init__(self, kind: str, builtins: dict[str, str] | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._builtins = dict(builtins or {})
        _ALL[kind] = self

    def add(self, name: str, item: T, module: str | None = None) -> T:
        """File `item` under `name`; a name can be taken only once (a typo would silently replace a part).

        `module` (default: the item's own) must be the one that owns a built-in name, so a user's
        module cannot take ``grpo`` before argym's has registered it.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"A {self.kind} needs a non-empty string name, got {name!r}.")
        owner = self._builtins.get(name)
        module = module or getattr(item, "__module__", None)
        if name in self._items or (owner is not None and module != owner):
            where = getattr(self._items[name], "__module__", "?") if name in self._items else owner
            raise ValueError(
                f"A {self.kind} named {name!r} is already registered ({where}); pick another name."
            )
        self._items[name] = item
        return item

    def remove(self, name: str) -> None:
        """Forget `name`, if registered (a test that added a part puts the table back as it was)."""
        self._items.pop(name, None)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator that files the decorated function or class under `name` (`add`) and returns it unchanged."""

        def deco(item: T) -> T:
            return self.add(name, item)

        return deco

    def get(self, name: str) -> T:
        """The part registered as `name`; an unknown name raises `ConfigError` listing the close matches."""
        if isinstance(name, str) and name not in self._items and name in self._builtins:
            importlib.import_module(self._builtins[name])
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise ConfigError(unknown_name(name, self.names(), self.kind)) from None

    def check(self, name: str, where: str = "") -> None:
        """Raise `ConfigError` (naming the config field `where`, if given) unless `name` is registered."""
        if name not in self:
            message = unknown_name(name, self.names(), self.kind)
            raise ConfigError(f"{where}: {message}" if where else message)

    def items(self) -> list[tuple[str, T]]:
        """(name, part) for every part registered so far, in the order registered (a lazy built-in once
        its module is imported)."""
        return list(self._items.items())

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._builtins))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._builtins

    def __iter__(self) -> Iterator[str]:
        """The registered names, sorted."""
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def catalog() -> dict[str, list[str]]:
    """Every registry's kind → its registered names (argym's own parts, plus any a user module added).

    Envs are gymnasium's registry (`gymnasium.register`); listed are argym's and a user's,
    not the ones gymnasium ships (CartPole, ...: not text envs).
    """
    import gymnasium as gym

    from argym.registration import register_envs

    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    register_envs()
    envs = sorted(
        i for i, spec in gym.registry.items() if not _module_of(spec.entry_point).startswith("gymnasium")
    )
    return {"env": envs, **{kind: reg.names() for kind, reg in _ALL.items()}}


def _module_of(entry_point: object) -> str:
    """The module an env's entry point (``"pkg.mod:Cls"`` or a class/function) lives in."""
    if isinstance(entry_point, str):
        return entry_point.partition(":")[0]
    return str(getattr(entry_point, "__module__", ""))
