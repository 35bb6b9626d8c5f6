"""The errors argym raises on purpose.

Each says what was expected, what came instead and what to do about it.
"""

from __future__ import annotations

import difflib

from gymnasium.error import ResetNeeded


def did_you_mean(name: str, choices: list[str] | tuple[str, ...], n: int = 3) -> str:
    """`" Did you mean: a, b?"` for the choices close to `name` (a typo), else `""`: the tail of an error."""
    close = difflib.get_close_matches(str(name), list(choices), n=n, cutoff=0.4)
    return f" Did you mean: {', '.join(close)}?" if close else ""


class ArgymError(Exception):
    """Base class of every error argym raises on purpose."""


class EnvStateError(ArgymError, ResetNeeded):
    """`step` was called before `reset`, or after the episode ended.

    Subclasses gymnasium's `ResetNeeded`, which `gym.make`'s order check raises
    in the same situation, so callers can catch either.
    """


class UnknownEnvError(ArgymError, KeyError):
    """An env id that is not registered; the message lists the close matches."""

    def __init__(self, env_id: str, known: list[str]):
        hint = did_you_mean(env_id, known)
        super().__init__(
            f"No environment {env_id!r} is registered.{hint} "
            f"Registered argym envs: {', '.join(sorted(known))} (`argym envs` lists them)."
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class MissingDependencyError(ArgymError, ImportError):
    """An optional dependency is not installed; the message names the extra."""

    def __init__(self, module: str, extra: str, purpose: str):
        super().__init__(
            f"{purpose} needs the Python package {module!r}, which is not installed. "
            f"Install it with: pip install 'argym[{extra}]'"
        )


class ConfigError(ArgymError, ValueError):
    """A config value or override that cannot be used; says which and why."""


class UserModuleError(ConfigError, ImportError):
    """A user's module (``--import MODULE``, ``module:function``) that cannot be imported.

    A `ConfigError`, so the CLI prints it as one line, and an `ImportError`, so code that
    catches a failed import (a caller of `argym.check.run_checks`) catches it too.
    """


class TaskNotFoundError(ArgymError, KeyError):
    """A task id that the task source does not hold."""

    def __str__(self) -> str:
        return str(self.args[0])


class InfrastructureError(ArgymError):
    """A harness fault (grader crash, lost worker), not the candidate's failure.

    Episodes hit by one are marked, excluded from learning and counted.
    """
