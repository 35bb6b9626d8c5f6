"""A procedural function task drawn from a family of specs: its stub, generated asserts and reference body.

The `functions` and `composed` sources (envs/code/tasks.py, envs/code/composed.py) differ only in their
families; both draw a task the same way, so a task's text depends on its index alone.
"""

from __future__ import annotations

import random
from typing import Any

Family = tuple[str, str, str, Any, Any]
"""(arguments, docstring, reference body, reference function, input generator)"""


def draw_spec(
    r: random.Random, families: list[Family], names: tuple[str, ...], n_tests: int
) -> tuple[str, str, str, str]:
    """One spec drawn with `r`: ``(stub, tests, entry point, reference body)``, the tests `n_tests` asserts
    of the reference's outputs on generated inputs."""
    args, doc, body, ref, inputs = families[r.randrange(len(families))]
    name = r.choice(names)
    stub = f'def {name}({args}):\n    """{doc}"""\n'
    lines = ["def check(candidate):"]
    for _ in range(n_tests):
        xs = inputs()
        lines.append(f"    assert candidate({', '.join(map(repr, xs))}) == {ref(*xs)!r}")
    return stub, "\n".join(lines) + "\n", name, f"    {body}\n"
