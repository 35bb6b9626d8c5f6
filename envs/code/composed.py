"""``composed``: procedural function tasks of two steps each, between ``functions`` and HumanEval.

Why it exists: a learning curve needs a task source the policy partly solves. SmolLM2-135M-Instruct
solves argym's one-step ``functions`` specs ("Return x plus 9.") at once (9 of the first 10 test tasks,
greedy, on the first attempt), which leaves GRPO nothing to learn, while HumanEval's docstring
algorithms are much harder (not measured). Each task here composes two of those steps (a filter and a sum, a
map and a reversal, an operation and a special case), stated in one sentence, with 5 generated asserts.
The constants and names give about 5,000 distinct prompts, so the test split can hold 200 tasks.
"""

from __future__ import annotations

import random
from typing import Any

from argym.envs.code.spec import Family, draw_spec

_NAMES = ("f", "g", "h", "solve", "compute", "fn", "run", "calc", "task", "answer", "go", "work")


def _families(r: random.Random) -> list[Family]:
    """(signature args, docstring, body, reference, input maker) for one draw of constants."""
    k, j = r.randint(2, 19), r.randint(-5, 9)
    c = r.choice("abcdexyz")
    ints = lambda: r.randint(-20, 20)  # noqa: E731
    lists = lambda: [r.randint(-9, 9) for _ in range(r.randint(0, 7))]  # noqa: E731
    words = lambda: "".join(r.choice("abcdexyz") for _ in range(r.randint(0, 8)))  # noqa: E731
    return [
        (
            "xs",
            f"Return the sum of the elements of xs that are greater than {j}.",
            f"return sum(v for v in xs if v > {j})",
            lambda xs: sum(v for v in xs if v > j),
            lambda: (lists(),),
        ),
        (
            "xs",
            f"Return a list of v * {k} for each element v of xs that is greater than {j}, in order.",
            f"return [v * {k} for v in xs if v > {j}]",
            lambda xs: [v * k for v in xs if v > j],
            lambda: (lists(),),
        ),
        (
            "xs",
            f"Return the largest element of xs plus {k}, or 0 if xs is empty.",
            f"return max(xs) + {k} if xs else 0",
            lambda xs: max(xs) + k if xs else 0,
            lambda: (lists(),),
        ),
        (
            "s",
            f"Return how many characters of s are not {c!r}.",
            f"return len(s) - s.count({c!r})",
            lambda s: len(s) - s.count(c),
            lambda: (words(),),
        ),
        (
            "s",
            f"Return s reversed, then repeated {k} times.",
            f"return s[::-1] * {k}",
            lambda s: s[::-1] * k,
            lambda: (words()[:3],),
        ),
        (
            "x, y",
            f"Return the sum of x and y, multiplied by {k}.",
            f"return (x + y) * {k}",
            lambda x, y: (x + y) * k,
            lambda: (ints(), ints()),
        ),
        (
            "xs",
            f"Return how many elements of xs are divisible by {k}.",
            f"return sum(v % {k} == 0 for v in xs)",
            lambda xs: sum(v % k == 0 for v in xs),
            lambda: (lists(),),
        ),
        (
            "x",
            f"Return x squared minus {k}.",
            f"return x * x - {k}",
            lambda x: x * x - k,
            lambda: (ints(),),
        ),
        (
            "s",
            f"Return s with every {c!r} removed.",
            f"return s.replace({c!r}, '')",
            lambda s: s.replace(c, ""),
            lambda: (words(),),
        ),
        (
            "xs",
            f"Return the elements of xs in reverse order, each plus {k}.",
            f"return [v + {k} for v in xs[::-1]]",
            lambda xs: [v + k for v in xs[::-1]],
            lambda: (lists(),),
        ),
        (
            "x, y",
            f"Return the smaller of x and y, multiplied by {k}.",
            f"return min(x, y) * {k}",
            lambda x, y: min(x, y) * k,
            lambda: (ints(), ints()),
        ),
        (
            "xs",
            f"Return the product of the elements of xs that are not {j}, or 1 if there are none.",
            f"p = 1\n    for v in xs:\n        if v != {j}:\n            p *= v\n    return p",
            lambda xs: _product(v for v in xs if v != j),
            lambda: ([r.randint(-4, 4) for _ in range(r.randint(0, 5))],),
        ),
    ]


def _product(values: Any) -> int:
    p = 1
    for v in values:
        p *= v
    return p


def composed_function(index: int, n_tests: int = 5) -> tuple[str, str, str, str]:
    """Task number `index` as ``(stub, tests, entry point, reference body)``: a two-step function spec and
    `n_tests` generated asserts (`argym.envs.code.tasks` makes it a task; this module imports nothing of it)."""
    r = random.Random(f"argym-code-composed-{index}")
    return draw_spec(r, _families(r), _NAMES, n_tests)
