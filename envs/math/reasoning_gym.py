"""Tasks from the `reasoning-gym` package (``reasoning_gym/NAME(key=value,...)``).

Task `index` is ``create_dataset(NAME, seed=index, size=1, **kwargs)[0]``: a
pure function of the index for every dataset, including those that draw a
template per dataset seed in ``__init__`` (gsm_symbolic), and cheap (about
0.01-0.06 ms per task, measured for basic_arithmetic, chain_sum, gsm_symbolic
and fraction_simplification).

Grading is the dataset's own ``score_answer``, the specification of what the
dataset accepts (math-verify, which grades argym's other math tasks, accepted
``word_sorting`` lists in the wrong order and refused answers
``spell_backward`` and ``decimal_arithmetic`` accept). The task carries a
scorer spec (``meta["scorer"]``); `dataset_score` rebuilds the entry from it
and scores in a verifier pool worker, under the pool's deadline. Its score in
[0, 1] is the reward; 1 is a success. reasoning-gym's version is part of the
board key (`MathEnv.grader_versions`). Where argym deliberately differs from
reasoning-gym's own evaluation (docs/reasoning_gym.md): the answer is the
last ``\\boxed{}`` (not an ``<answer>`` tag), passed verbatim; no boxed answer,
or one over 1000 characters, scores 0 without asking the scorer; a scorer
past the deadline scores 0; a scorer that raises is an infrastructure failure.
"""

from __future__ import annotations

import math
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from argym.envs.math.answer import BOXED_INSTRUCTION, strip_math_delimiters
from argym.envs.tasks import ProceduralSource, TaskSource
from argym.errors import ConfigError, MissingDependencyError, did_you_mean
from argym.types import Task

SCORER_KIND = "reasoning_gym"
SOURCE_PREFIX = "reasoning_gym/"


def _rg() -> Any:
    try:
        import reasoning_gym
    except ImportError:
        raise MissingDependencyError(
            "reasoning_gym", "reasoning-gym", "Math tasks from reasoning-gym (tasks='reasoning_gym/...')"
        ) from None
    return reasoning_gym


def reasoning_gym_source(name: str, test_size: int = 500, **kwargs: Any) -> ProceduralSource:
    """A source of reasoning-gym dataset `name` configured by `kwargs` (its config fields)."""
    rg = _rg()
    known = sorted(rg.factory.DATASETS)
    if name not in known:
        hint = did_you_mean(name, known)
        raise ConfigError(
            f"reasoning-gym has no dataset {name!r}.{hint} It has {len(known)}, e.g. "
            f"{', '.join(known[:8])}, ..."
        )
    if {"seed", "size"} & kwargs.keys():
        raise ConfigError(
            f"reasoning_gym/{name}: seed and size are set by argym (one dataset seed per "
            f"task index); remove them from the source spec."
        )

    def make(index: int) -> Task:
        entry = rg.create_dataset(name, seed=index, size=1, **kwargs)[0]
        scorer = {"kind": SCORER_KIND, "dataset": name, "config": dict(kwargs), "seed": index}
        return Task(
            id="",
            prompt=({"role": "user", "content": f"{entry['question']}\n{BOXED_INSTRUCTION}"},),
            answer=strip_math_delimiters(str(entry["answer"])),
            meta={"dataset": name, **kwargs, "scorer": scorer},
        )

    try:
        make(0)  # a bad config fails here, with the dataset's own message
    except (TypeError, ValueError, AssertionError) as e:
        raise ConfigError(f"reasoning_gym/{name} rejects the config {kwargs}: {e}") from e
    args = ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))
    return ProceduralSource(
        f"{SOURCE_PREFIX}{name}" + (f"({args})" if args else ""), make, test_size=test_size
    )


def is_reasoning_gym(source: TaskSource) -> bool:
    """Whether `source` is a `reasoning_gym_source` (its tasks are graded by their dataset's scorer)."""
    return isinstance(source, ProceduralSource) and source.name.startswith(SOURCE_PREFIX)


def reasoning_gym_version() -> str:
    try:
        return version("reasoning-gym")
    except PackageNotFoundError:
        return "unknown"


def dataset_score(scorer: dict[str, Any], answer: str) -> float:
    """The dataset's own ``score_answer`` of `answer` on the task `scorer` names (``meta["scorer"]``).

    Runs in a verifier pool worker (`argym.envs.math.verifier.grade`). Rebuilds the entry the task was
    made from (its config and seed: the metadata and config the scorer reads). Raises on a scorer that
    fails or returns something that is not a score in [0, 1]: an infrastructure failure, not the answer's.
    """
    if not isinstance(scorer, dict) or scorer.get("kind") != SCORER_KIND:
        raise ValueError(f"not a reasoning-gym scorer spec: {scorer!r}")
    dataset = _rg().create_dataset(scorer["dataset"], seed=scorer["seed"], size=1, **scorer["config"])
    score = dataset.score_answer(answer, dataset[0])
    try:
        value = float(score)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise ValueError(
            f"reasoning-gym's {scorer['dataset']} scorer returned {score!r}, not a score in [0, 1]"
        )
    return value


def preload() -> None:
    """Import reasoning-gym if it is installed (a verifier worker's warm-up: its import takes seconds,
    which must not count against the first score's deadline)."""
    from importlib.util import find_spec

    if find_spec("reasoning_gym") is not None:
        import reasoning_gym  # noqa: F401
