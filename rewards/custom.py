"""A user's reward function as a reward component: ``my_pkg.rewards:brevity`` in a recipe's weights.

The function takes one `Trajectory` and returns a float, or a dict of named floats (its parts,
each logged as ``reward/<component>/<part>``, summed into the component's value). A function that
also takes ``task`` (``def exact(traj, task)``) gets the episode's `Task`, its gold ``answer`` and
``meta`` included, as TRL's and verifiers' reward functions get the dataset's columns. It runs beside
the built-in components, weighted like them. A function that raises, or returns something that
is not a finite number (or a dict of them), is a harness fault: the trajectory is marked an
infrastructure failure and counted (``reward/<component>_infra_failures``), never scored 0 and
never a crashed run.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from argym.callables import load_function
from argym.errors import ConfigError, InfrastructureError
from argym.types import Task, Trajectory

Score = float | dict[str, float]
"""What a component gives one trajectory: its value, or its named parts (the value is their sum)."""
TaskLookup = Callable[[str], Task]
"""The run's task by id (`env_tasks`)."""


def is_callable_spec(name: str) -> bool:
    """A weights key naming user code (``module:function``) rather than a registered component."""
    return ":" in name


def callable_component(
    spec: str, tasks: TaskLookup | None = None
) -> Callable[[list[Trajectory]], list[Score]]:
    """The scorer of the ``module:function`` reward `spec` (`ConfigError` if it cannot be imported, or if it
    takes ``task`` and no `tasks` lookup is given)."""
    fn = load_function(spec, f"reward.weights key {spec!r}")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no signature to read (a builtin): called with the trajectory alone
        params = []
    wants_task = any(p.name == "task" or p.kind is p.VAR_KEYWORD for p in params)
    if wants_task and tasks is None:
        raise ConfigError(
            f"reward {spec} takes the task, but this composer was given no task lookup (tasks=)."
        )
    lookup = tasks if wants_task else None

    def score(trajectories: list[Trajectory]) -> list[Score]:
        return [_checked(spec, _call(spec, fn, t, lookup)) for t in trajectories]

    return score


def env_tasks(env_id: str, env_kwargs: dict[str, Any]) -> TaskLookup:
    """The tasks of the env `env_id` makes with `env_kwargs`, by id; the env is made on the first lookup."""
    source: Any = None

    def get(task_id: str) -> Task:
        nonlocal source
        if source is None:
            import argym

            with argym.make(env_id, **env_kwargs) as env:
                source = getattr(env.unwrapped, "tasks", None)
            if source is None:
                raise ConfigError(
                    f"a reward takes the task, but {env_id} has no task source to read it from."
                )
        return source.get(task_id)

    return get


def _call(spec: str, fn: Callable[..., Any], t: Trajectory, tasks: TaskLookup | None) -> Any:
    try:
        return fn(t, task=tasks(t.task_id)) if tasks is not None else fn(t)
    except InfrastructureError:
        raise
    except Exception as e:  # the user's code failed, not the candidate: a harness fault
        raise InfrastructureError(f"reward {spec} raised {type(e).__name__}: {e} (task {t.task_id!r})") from e


def _checked(spec: str, value: Any) -> Score:
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if number(value):
        return float(value)
    if isinstance(value, dict) and value and all(isinstance(k, str) and number(v) for k, v in value.items()):
        return {k: float(v) for k, v in value.items()}
    raise InfrastructureError(
        f"reward {spec} returned {value!r}; expected a finite float or a dict of named finite floats."
    )
