"""Multi-step word problems whose intermediate quantities are known (``tasks="word_problems"``).

Each problem comes from a small template (a shop, a bus, a farm, ...) with
seeded numbers. Beside the gold answer, the task's ``meta["steps"]`` lists
every intermediate quantity in solving order, as ``{"name", "expr", "value"}``
(``{"name": "apples bought", "expr": "4 * 12", "value": 48}``), the last
being the answer. So a sub-question can be checked on its own, either as the
arithmetic expression or by the quantity's name: this is what the
Decomposer-Reasoner wrapper (`argym.envs.wrappers`) verifies sub-answers
against, and where its oracle decomposition comes from.

Like `arithmetic`, task `index` is a pure function of the index and the knobs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from argym.envs.math.answer import BOXED_INSTRUCTION
from argym.envs.math.arithmetic import evaluate
from argym.envs.tasks import ProceduralSource
from argym.errors import ConfigError
from argym.types import Task

Step = tuple[str, str]  # (name, expression over the template's letters)


@dataclass(frozen=True)
class Template:
    """A story with letters for its numbers, and the named steps that solve it."""

    name: str
    text: str
    retold: str
    """The same story told another way, same numbers and answer (Co-rewarding-I's second view)."""
    steps: tuple[Step, ...]
    letters: str = "abc"
    fits: Callable[[dict[str, int]], bool] = lambda v: True
    """Numbers the story allows (e.g. no more eaten than bought)."""


TEMPLATES: tuple[Template, ...] = (
    Template(
        "apples",
        "Ann buys {a} bags of {b} apples and eats {c}. How many apples are left?",
        "Ann eats {c} of the apples from {a} bags that hold {b} apples each. How many apples remain?",
        (("apples bought", "a * b"), ("apples left", "a * b - c")),
        fits=lambda v: v["c"] <= v["a"] * v["b"],
    ),
    Template(
        "bus",
        "A bus has {a} rows of {b} seats and {c} people sit down. How many seats are free?",
        "{c} people take seats on a bus with {b} seats in each of its {a} rows. How many seats are empty?",
        (("seats", "a * b"), ("free seats", "a * b - c")),
        fits=lambda v: v["c"] <= v["a"] * v["b"],
    ),
    Template(
        "coins",
        "Tom has {a} coins and earns {b} coins a day for {c} days. How many coins does he have?",
        "For {c} days Tom earns {b} coins a day. He had {a} coins before. How many coins does he have now?",
        (("coins earned", "b * c"), ("coins in all", "a + b * c")),
    ),
    Template(
        "pens",
        "{a} boxes hold {b} pens each and {c} boxes hold {d} pens each. How many pens are there?",
        "There are {c} boxes of {d} pens and {a} boxes of {b} pens. How many pens are there in all?",
        (
            ("pens in the first boxes", "a * b"),
            ("pens in the other boxes", "c * d"),
            ("pens in all", "a * b + c * d"),
        ),
        letters="abcd",
    ),
    Template(
        "farm",
        "A farm has {a} hens and {b} cows. How many legs do they have?",
        "On a farm live {b} cows and {a} hens. How many legs do the animals have in total?",
        (("hen legs", "2 * a"), ("cow legs", "4 * b"), ("legs in all", "2 * a + 4 * b")),
        letters="ab",
    ),
    Template(
        "pages",
        "Sam reads {a} pages a day for {b} days, then {c} more pages. How many pages did he read?",
        "For {b} days Sam reads {a} pages each day, and then he reads {c} pages more. How many pages in all?",
        (("pages in the first days", "a * b"), ("pages in all", "a * b + c")),
    ),
    Template(
        "cakes",
        "A baker makes {a} trays of {b} cakes, sells {c} and bakes {d} more. How many cakes are left?",
        "A baker bakes {a} trays with {b} cakes on each, sells {c} cakes, then bakes {d} more. How many cakes does she have?",
        (("cakes baked", "a * b"), ("cakes after selling", "a * b - c"), ("cakes left", "a * b - c + d")),
        letters="abcd",
        fits=lambda v: v["c"] <= v["a"] * v["b"],
    ),
)


def _value(expr: str, numbers: dict[str, int]) -> int:
    """An expression over the template's letters with `+ - *` only (our own templates, no user input)."""
    tokens = [str(numbers[t]) if t in numbers else t for t in expr.split()]
    return evaluate([int(t) for t in tokens[::2]], tokens[1::2])


def word_problem_source(max_number: int = 12, test_size: int = 500) -> ProceduralSource:
    """Word problems with numbers in ``2..max_number`` drawn per task; see the module docstring."""
    if not isinstance(max_number, int) or not 3 <= max_number <= 10_000:
        raise ConfigError(f"word_problems: max_number must be an integer in 3..10000, got {max_number!r}.")

    def make(index: int) -> Task:
        rng = np.random.default_rng([index, max_number, 7])
        tpl = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        for _ in range(100):  # redraw numbers the story does not allow (rare)
            numbers = {k: int(rng.integers(2, max_number + 1)) for k in tpl.letters}
            if tpl.fits(numbers):
                break
        steps = []
        for name, expr in tpl.steps:
            text = " ".join(str(numbers[t]) if t in numbers else t for t in expr.split())
            steps.append({"name": name, "expr": text, "value": _value(expr, numbers)})
        question = tpl.text.format(**numbers)
        return Task(
            id="",
            prompt=({"role": "user", "content": f"{question} {BOXED_INSTRUCTION}"},),
            answer=str(steps[-1]["value"]),
            meta={
                "template": tpl.name,
                "steps": steps,
                "rephrasings": (f"{tpl.retold.format(**numbers)} {BOXED_INSTRUCTION}",),
            },
        )

    distinct = len(TEMPLATES) * (max_number - 1) ** 3
    return ProceduralSource(
        f"word_problems(max_number={max_number})", make, test_size=int(min(test_size, max(1, distinct // 16)))
    )
