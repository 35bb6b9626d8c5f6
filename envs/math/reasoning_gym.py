"""Tasks from the `reasoning-gym` package (``reasoning_gym/NAME(key=value,...)``).

Task `index` is ``create_dataset(NAME, seed=index, size=1, **kwargs)[0]``: a
pure function of the index for every dataset, including those that draw a
template per dataset seed in ``__init__`` (gsm_symbolic), and cheap (about
0.01-0.06 ms per task, measured for basic_arithmetic, chain_sum, gsm_symbolic
and fraction_simplification). Grading is math-verify, as for every math task,
not reasoning-gym's own `score_answer`; so a task that asks for a particular
form (fraction_simplification's lowest terms) accepts any equal value.
"""

from __future__ import annotations

import difflib
from typing import Any

from argym.errors import ConfigError, MissingDependencyError
from argym.types import Task
from argym.envs.math.verifier import BOXED_INSTRUCTION, strip_math_delimiters
from argym.envs.tasks import ProceduralSource


def _rg() -> Any:
    try:
        import reasoning_gym
    except ImportError:
        raise MissingDependencyError("reasoning_gym", "reasoning-gym",
                                     "Math tasks from reasoning-gym (tasks='reasoning_gym/...')") from None
    return reasoning_gym


def reasoning_gym_source(name: str, test_size: int = 500, **kwargs: Any) -> ProceduralSource:
    """A source of reasoning-gym dataset `name` configured by `kwargs` (its config fields)."""
    rg = _rg()
    known = sorted(rg.factory.DATASETS)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise ConfigError(f"reasoning-gym has no dataset {name!r}.{hint} It has {len(known)}, e.g. "
                          f"{', '.join(known[:8])}, ...")
    if {"seed", "size"} & kwargs.keys():
        raise ConfigError(f"reasoning_gym/{name}: seed and size are set by argym (one dataset seed per "
                          f"task index); remove them from the source spec.")

    def make(index: int) -> Task:
        entry = rg.create_dataset(name, seed=index, size=1, **kwargs)[0]
        return Task(id="", prompt=({"role": "user", "content": f"{entry['question']}\n{BOXED_INSTRUCTION}"},),
                    answer=strip_math_delimiters(str(entry["answer"])),
                    meta={"dataset": name, **kwargs})

    try:
        make(0)  # a bad config fails here, with the dataset's own message
    except (TypeError, ValueError, AssertionError) as e:
        raise ConfigError(f"reasoning_gym/{name} rejects the config {kwargs}: {e}") from e
    args = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
    return ProceduralSource(f"reasoning_gym/{name}" + (f"({args})" if args else ""), make, test_size=test_size)
