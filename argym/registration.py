"""Registers argym's envs with gymnasium under the ``argym/`` namespace.

Entry points are strings, so registering imports nothing heavy; the env's
module loads on the first `gym.make`.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from argym.envargs import check_kwargs
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
        "argym/Support-v0",
        "argym.envs.support.env:SupportEnv",
        "Serve a simulated customer (scripted, or user=SPEC) through tools on an SQLite shop, under a written "
        "policy; outcome plus per-turn compliance parts (τ-bench style).",
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


ENTRY_POINT_GROUP = "argym.envs"
"""Installed packages list their env modules under this entry-point group, e.g. in pyproject.toml:
``[project.entry-points."argym.envs"] my_pkg = "my_pkg.envs"``; loading one imports the module (whose
`gymnasium.register` calls are its side effect), and a callable entry point is called."""

_entry_points_loaded = False


GYMNASIUM_ADAPTER = EnvEntry(
    "argym/Gymnasium-v0",
    "argym.envs.gym_text:GymTextEnv",
    "Any Gymnasium env whose actions are text (env=ID, its kwargs beside): string or message observations, "
    "the step's reward; `argym.make` of such an env's own id runs it through this adapter.",
)
"""Not an env of its own (it needs ``env=``), so not in `ENVS`: the one that runs a plain Gymnasium text env."""


def register_envs() -> None:
    """Register every argym env, then those of installed packages (`ENTRY_POINT_GROUP`); idempotent."""
    for entry in (*ENVS, GYMNASIUM_ADAPTER):
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
    global _entry_points_loaded
    if _entry_points_loaded:  # scanning the installed packages costs milliseconds; once per process
        return
    _entry_points_loaded = True
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = ep.load()
        except Exception as e:  # one broken plug-in must not take `import argym` down with it
            warnings.warn(f"argym: cannot load env plug-in {ep.name} ({ep.value}): {e}", stacklevel=2)
            continue
        if callable(loaded):
            loaded()


def own_ids() -> list[str]:
    """The envs argym itself ships (the contract tests run on each; a user's or a test's are not argym's)."""
    return [e.id for e in ENVS]


def registered_ids() -> list[str]:
    """argym's env ids, then every other text env registered (by entry points, `--import` or user code)."""
    register_envs()
    own = [e.id for e in ENVS]
    return own + sorted(i for i, spec in gym.registry.items() if i not in own and not _is_gymnasiums(spec))


def _is_gymnasiums(spec: Any) -> bool:
    """One of the envs gymnasium ships (CartPole, ...): not a text env."""
    entry = spec.entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else str(getattr(entry, "__module__", ""))
    return module.startswith(("gymnasium", "shimmy", "ale_py"))


def description(env_id: str) -> str:
    """The one-line description `argym envs` shows: argym's own, else the entry point's docstring."""
    for entry in (*ENVS, GYMNASIUM_ADAPTER):
        if entry.id == env_id:
            return entry.description
    try:
        doc = inspect.getdoc(creator(env_id)) or ""
    except Exception as e:  # a listing must not fail on one env whose module cannot load
        return f"(cannot load: {e})"
    return doc.strip().split("\n")[0]


def resolve(env_id: str) -> str:
    """`env_id` as gymnasium's registry knows it: ``pkg.mod:Name-v0`` imports ``pkg.mod`` first.

    That is Gymnasium's ``module:id`` form, so a recipe or the CLI can name an env whose module
    registers it without `--import`. An unknown id raises `UnknownEnvError` with the close matches.
    """
    register_envs()
    if env_id not in gym.registry and ":" in env_id:
        module, _, name = env_id.partition(":")
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            raise ConfigError(
                f"env {env_id!r}: cannot import module {module!r} ({e}); is its package installed, "
                "or its directory on PYTHONPATH?"
            ) from None
        env_id = name
    if env_id not in gym.registry:
        raise UnknownEnvError(env_id, registered_ids())
    return env_id


def creator(env_id: str) -> Any:
    """The class or function that builds `env_id` (its registered entry point, loaded)."""
    spec = gym.spec(resolve(env_id))
    entry = spec.entry_point
    return load_env_creator(entry) if isinstance(entry, str) else entry


def speaks_argym(make: Any) -> bool:
    """Whether `make` (an env's entry point) builds an argym text env: a class with `TextEnv`'s hooks, or a
    factory that takes argym's runtime kwargs (``executors``, or ``**kwargs``). Anything else is a plain
    Gymnasium env, which `make` runs through `GYMNASIUM_ADAPTER`. (Duck-typed: this layer imports no env.)"""
    if inspect.isclass(make):
        return all(hasattr(make, hook) for hook in ("load_tasks", "respond", "snapshot"))
    try:
        params = inspect.signature(make).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "executors" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """`gym.make`, after checking `kwargs` against the env's constructor (`argym.envargs.check_kwargs`).

    An unknown id names the close matches; an unknown kwarg, a value of the wrong type or an unknown
    choice (``sandbox=dockr``) is a `ConfigError` here, before the env is built. A plain Gymnasium env
    (not an argym `TextEnv`) is made inside `GYMNASIUM_ADAPTER`, so the engine runs it as a text env.
    """
    name = resolve(env_id)
    adapter = GYMNASIUM_ADAPTER.id
    if name != adapter and not speaks_argym(creator(name)):
        return gym.make(adapter, **checked_kwargs(adapter, {**kwargs, "env": env_id}))
    return gym.make(name, **checked_kwargs(name, kwargs))


def checked_kwargs(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` checked against `env_id`'s constructor and coerced (what `make` passes on), building nothing."""
    return check_kwargs(resolve(env_id), creator(env_id), kwargs)
