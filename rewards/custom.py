"""A user's reward function as a reward component: ``my_pkg.rewards:brevity`` in a recipe's weights.

The function takes one `Trajectory` and returns a float, or a dict of named floats (its parts,
each logged as ``reward/<component>/<part>``, summed into the component's value). It runs beside
the built-in components, weighted like them. A function that raises, or returns something that
is not a finite number (or a dict of them), is a harness fault: the trajectory is marked an
infrastructure failure and counted (``reward/<component>_infra_failures``), never scored 0 and
never a crashed run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from argym.callables import load_function
from argym.errors import InfrastructureError
from argym.types import Trajectory

Score = float | dict[str, float]
"""What a component gives one trajectory: its value, or its named parts (the value is their sum)."""


def is_callable_spec(name: str) -> bool:
    """A weights key naming user code (``module:function``) rather than a registered component."""
    return ":" in name


def callable_component(spec: str) -> Callable[[list[Trajectory]], list[Score]]:
    """The scorer of the ``module:function`` reward `spec` (`ConfigError` if it cannot be imported)."""
    fn = load_function(spec, f"reward.weights key {spec!r}")

    def score(trajectories: list[Trajectory]) -> list[Score]:
        return [_checked(spec, _call(spec, fn, t)) for t in trajectories]

    return score


def _call(spec: str, fn: Callable[[Trajectory], Any], t: Trajectory) -> Any:
    try:
        return fn(t)
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
