"""How `argym/ToolCall-v0` grades a final turn.

Executable (and MCP) tasks: the answer read by the task's answer type (numbers by value, the last number in
the text; weekdays by name; text by containment), with ``grounded`` only if one of the episode's successful
tool results held it, and where the task asked to save values, only if the key-value store holds them. BFCL
tasks: the turn's calls by argym's AST checker against BFCL's possible answers. The env keeps the episode
(its tool results, store and call count) and turns a grade into reward parts.
"""

from __future__ import annotations

import re
from typing import Any

from argym.envs.toolcall.bfcl_checker import check_calls
from argym.envs.toolcall.executable import WEEKDAYS
from argym.envs.tools.calls import ParsedTurn
from argym.types import Task

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def read_answer(text: str, expected: str, answer_type: str | None, last: bool = True) -> tuple[str, bool]:
    """The answer `text` gives by `answer_type` (``weekday``, ``text``, else a number), and whether it is
    `expected`. `last=False` asks whether any answer in `text` is (a tool result read for grounding:
    "1447-03-15 is a Monday")."""
    if answer_type == "weekday":
        named = [d for d in WEEKDAYS if re.search(rf"\b{d}\b", text, re.IGNORECASE)]
        if not last:
            return expected, expected in named
        return (named[0] if len(named) == 1 else ", ".join(named)), named == [expected]
    if answer_type == "text":
        return text.strip(), bool(expected.strip()) and expected.strip().lower() in text.lower()
    numbers = [n.replace(",", "") for n in _NUMBER.findall(text)]
    places = len(expected.partition(".")[2])  # a tool's 3622.047244 grounds an answer rounded to 3622
    for number in reversed(numbers if not last else numbers[-1:]):
        try:
            value = float(number) if last else round(float(number), places)
            if abs(value - float(expected)) <= 1e-6 * max(1.0, abs(float(expected))):
                return number, True
        except ValueError:
            continue
    return (numbers[-1] if numbers else ""), False


def grade_answer(
    text: str,
    task: Task,
    verdict: dict[str, Any],
    results: list[str] | None,
    store: dict[str, Any],
    calls_made: int,
) -> bool:
    """Whether the final answer `text` succeeds; fills `verdict` with ``answer``, ``expected``, ``correct``,
    ``total_calls`` and, when they apply, ``grounded`` (`results`: the episode's successful tool results;
    None: not graded grounded) and ``store_ok``."""
    expected = str(task.answer)
    answer_type = task.meta.get("answer_type")
    answer, correct = read_answer(text, expected, answer_type)
    verdict.update(answer=answer, expected=expected, correct=correct, total_calls=calls_made)
    success = correct
    if results is not None:
        verdict["grounded"] = any(read_answer(r, expected, answer_type, last=False)[1] for r in results)
        success = correct and verdict["grounded"]
    expect_store = task.meta.get("expect_store") or {}
    if expect_store:  # the task also asked for values to be saved in the key-value store
        verdict["store_ok"] = all(str(store.get(k, "")).strip() == v for k, v in expect_store.items())
        success = success and verdict["store_ok"]  # grounded and saved, when both apply
    return success


def grade_bfcl(turn: ParsedTurn, task: Task) -> tuple[dict[str, Any], bool]:
    """A BFCL turn's verdict (``check``: the checker's reason, or "ok") and whether its calls are right."""
    verdict: dict[str, Any] = {
        "calls": [c.name for c in turn.calls],
        "errors": list(turn.errors),
        "format_ok": turn.ok,
        "category": task.meta["category"],
    }
    if turn.errors:
        ok, why = False, "the calls could not be read: " + " ".join(turn.errors)
    else:
        res = check_calls(
            task.meta["functions"], [(c.name, c.arguments) for c in turn.calls], task.meta["ground_truth"]
        )
        ok, why = res.valid, res.error
    verdict["check"] = why or "ok"
    return verdict, ok
