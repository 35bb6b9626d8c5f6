"""What every check shares: the config, a check's result, the env under test and its bounded calls.

A check gets a `Subject`: it builds fresh instances of the env by id and runs
every `reset`/`step` through a watchdog (a worker thread with a deadline), so
a hanging grader becomes a `Hang` the check reports, never a hung checker.
Each call's duration is recorded for the timing check.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, SupportsFloat, TypeVar

import gymnasium as gym

PASS, FAIL, NOT_APPLICABLE = "pass", "fail", "n/a"


@dataclass
class CheckConfig:
    """What to check and how hard."""

    env_id: str
    """A Gymnasium id (``argym/Code-v0`` or a user's ``my_pkg/MyEnv-v0``)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The env's keyword arguments (JSON-able: the cross-process checks pass them to a child process)."""
    imports: tuple[str, ...] = ()
    """Modules to import first: the ones that register the env (and its exploits)."""
    step_timeout_s: float = 60.0
    """Bound on one `step`; a longer one is a failure of the timing check, a hang ends the episode."""
    reset_timeout_s: float = 60.0
    """Bound on one `reset` (and on building the env)."""
    max_steps: int = 4
    """Most steps of one probing episode."""
    quick: bool = False
    """Run the cheap checks only (no child processes, no exploit corpus)."""
    only: tuple[str, ...] = ()
    """Run only these checks (by name); all when empty."""
    seed: int = 0
    tokens: str | None = None
    """A model whose tokenizer and chat template the tokens check uses (``tiny``, ``smollm2``, ``hf:PATH``);
    without one that check does not run."""

    def __post_init__(self) -> None:
        if self.step_timeout_s <= 0 or self.reset_timeout_s <= 0:
            raise ValueError(
                f"timeouts must be positive, got step {self.step_timeout_s}, reset {self.reset_timeout_s}."
            )
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {self.max_steps}.")
        try:
            json.dumps(self.kwargs)
        except TypeError as e:
            raise ValueError(
                f"env kwargs must be JSON-able (they are passed to a child process): {e}"
            ) from None


@dataclass
class Outcome:
    """One check's result: ``pass``, ``fail`` or ``n/a`` (with why), and the evidence."""

    check: str
    result: str
    evidence: str
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "result": self.result,
            "evidence": self.evidence,
            "seconds": round(self.seconds, 3),
        }


class Hang(Exception):
    """A `reset`/`step`/`close` did not return within its bound."""


class Timings:
    """Durations of every bounded call, by kind (``reset``, ``step``), with the slowest's label."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, str]] = []
        self.hangs: list[str] = []
        self._lock = threading.Lock()

    def add(self, kind: str, seconds: float, label: str) -> None:
        with self._lock:
            self.calls.append((kind, seconds, label))


T = TypeVar("T")


def bounded(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run `fn` in a daemon thread; raise `Hang` if it has not returned after `timeout_s`.

    A thread cannot be killed: a hung call is abandoned (it keeps its thread until
    the process exits), and the env it belongs to is never used again.
    """
    value: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            value.append(fn())
        except BaseException as e:
            error.append(e)

    t = threading.Thread(target=run, name=f"argym-check {what}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise Hang(f"{what} did not return within {timeout_s:g} s")
    if error:
        raise error[0]
    return value[0]


def make_env(env_id: str, kwargs: dict[str, Any]) -> gym.Env:
    """Build the env by id: argym's through `argym.make`, anything else through `gym.make`."""
    import argym

    if env_id.startswith("argym/"):
        return argym.make(env_id, **kwargs)
    if env_id not in gym.registry:
        raise argym.UnknownEnvError(env_id, sorted(gym.registry))
    return gym.make(env_id, **kwargs)


def owner(env: gym.Env, name: str) -> Any | None:
    """The outermost object of `env`'s wrapper stack that defines `name` (None if none does).

    Checks call an env's own methods (`snapshot`, `oracle_action`) on the object
    that defines them, so gymnasium's bookkeeping wrappers never get in between.
    """
    e: Any = env
    while True:
        if not type(e).__module__.startswith("gymnasium.") and hasattr(type(e), name):
            return e
        if not isinstance(e, gym.Wrapper):
            return None
        e = e.env


def core(env: gym.Env) -> gym.Env:
    """`env` without gymnasium's order and passive checkers (they forbid restoring into a fresh env)."""
    from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

    e = env
    while isinstance(e, (OrderEnforcing, PassiveEnvChecker)):
        e = e.env
    return e


def family(env: gym.Env) -> str | None:
    """The exploit family an env declares: ``metadata["argym.exploits"]`` (``code``, ``swe``, ...)."""
    return (getattr(env.unwrapped, "metadata", None) or {}).get("argym.exploits")


class Subject:
    """The env under test: fresh instances by id, bounded and timed calls, all closed at the end."""

    def __init__(self, config: CheckConfig):
        self.config = config
        self.timings = Timings()
        self._open: list[gym.Env] = []
        self._hung: set[int] = set()

    def make(self) -> gym.Env:
        env = bounded(
            lambda: core(make_env(self.config.env_id, self.config.kwargs)),
            self.config.reset_timeout_s,
            f"making {self.config.env_id}",
        )
        self._open.append(env)
        return env

    def reset(
        self,
        env: gym.Env,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        label: str = "reset",
    ) -> tuple[Any, dict[str, Any]]:
        return self._call(env, "reset", lambda: env.reset(seed=seed, options=options), label)

    def step(
        self, env: gym.Env, action: Any, label: str = "step"
    ) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        return self._call(env, "step", lambda: env.step(action), label)

    def call(self, env: gym.Env, kind: str, fn: Callable[[], T], label: str) -> T:
        """Any other call on an env (snapshot, restore, oracle), bounded like a step."""
        return self._call(env, kind, fn, label)

    def _call(self, env: gym.Env, kind: str, fn: Callable[[], T], label: str) -> T:
        bound = self.config.reset_timeout_s if kind in ("reset", "restore") else self.config.step_timeout_s
        start = time.monotonic()
        try:
            return bounded(fn, bound, f"{kind} ({label})")
        except Hang as e:
            self.timings.hangs.append(str(e))
            self._hung.add(id(env))
            raise
        finally:
            self.timings.add(kind, time.monotonic() - start, label)

    def close(self, env: gym.Env) -> None:
        """Close `env` (bounded); a hung env is left alone."""
        if env in self._open:
            self._open.remove(env)
        if id(env) in self._hung or id(getattr(env, "unwrapped", env)) in self._hung:
            return
        try:
            bounded(env.close, self.config.reset_timeout_s, "close")
        except Hang as e:
            self.timings.hangs.append(str(e))

    def close_all(self) -> None:
        for env in list(self._open):
            self.close(env)


def canonical(value: Any) -> str:
    """A stable text form of an observation, reward or info, for comparing two runs."""
    return json.dumps(value, sort_keys=True, default=_fallback, ensure_ascii=False)


def _fallback(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    return repr(value)


def short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text)} chars)"
