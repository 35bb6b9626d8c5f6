"""Registers argym's envs with gymnasium under the ``argym/`` namespace.

Entry points are strings, so registering imports nothing heavy; the env's
module loads on the first `gym.make`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from argym.errors import ConfigError, UnknownEnvError


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str


ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        "argym/Math-v0",
        "argym.envs.math.env:MathEnv",
        "Answer a math question in \\boxed{}; graded by math-verify against the gold answer.",
    ),
    EnvEntry(
        "argym/Code-v0",
        "argym.envs.code.env:CodeEnv",
        "Write a Python function; graded by hidden tests in a sandbox (HumanEval by default).",
    ),
    EnvEntry(
        "argym/DecomposeReasoner-v0",
        "argym.envs.wrappers.decompose:make_decompose_reasoner",
        "Decompose a task (env=, default Math) into checkable sub-questions, answer each, then the task; "
        "min-form dense reward.",
    ),
    EnvEntry(
        "argym/SWE-v0",
        "argym.envs.swe.env:SWEEnv",
        "Fix an issue in a real repository with tools (view, search, edit, run, submit); graded by its tests "
        "in a fresh sandbox (SWE-bench format; tasks synthesised from PyPI projects).",
    ),
    EnvEntry(
        "argym/ToolCall-v0",
        "argym.envs.toolcall.env:ToolCallEnv",
        "Call tools (OpenAI tool_calls, JSON or <tool_call> tags) and answer; executable multi-step tasks "
        "(default) or BFCL (tasks=bfcl/CATEGORY).",
    ),
    EnvEntry(
        "argym/OpenEnv-v0",
        "argym.envs.openenv.env:OpenEnvEnv",
        "A running OpenEnv server (url=) as a text env: its observations as user messages, its reward as outcome "
        "(pip install 'argym[openenv]').",
    ),
    EnvEntry(
        "argym/Verifiers-v0",
        "argym.envs.verifiers.env:VerifiersEnv",
        "An installed verifiers environment (env=NAME, its taskset package); graded by its own weighted rewards.",
    ),
)


def register_envs() -> None:
    """Register every argym env; safe to call more than once."""
    for entry in ENVS:
        if entry.id not in gym.registry:
            # No TimeLimit: a TextEnv truncates by its own `max_turns`.
            gym.register(
                id=entry.id,
                entry_point=entry.entry_point,
                max_episode_steps=None,
                order_enforce=False,  # TextEnv raises its own EnvStateError
                # gymnasium's passive checker breaks `restore()` into a fresh env (its first
                # step must follow a reset through the wrapper); the full `check_env` runs in tests.
                disable_env_checker=True,
            )


def registered_ids() -> list[str]:
    return [e.id for e in ENVS]


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """`gym.make` with an error that names the close matches for an unknown id."""
    register_envs()
    if env_id not in gym.registry:
        raise UnknownEnvError(env_id, registered_ids())
    try:
        return gym.make(env_id, **kwargs)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise ConfigError(
            f"{env_id} does not take that argument: {e}. "
            f"See the env's docstring (`argym envs`) for its kwargs."
        ) from None
