"""Checkable sub-questions: a safe arithmetic evaluator and the rules a sub-question must meet.

A sub-question is checkable on its own when the env can compute its answer
without the policy's help: it is an arithmetic expression (numbers, ``+ - * /``
and parentheses, evaluated exactly with `fractions.Fraction` on the parsed
syntax tree, never with `eval`), or the name of one of the task's known
intermediate quantities (``meta["steps"]`` of the arithmetic and word-problem
generators). Anything else is rejected with a reason the policy is shown.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

MAX_EXPR_CHARS = 200  # longer "sub-questions" are not sub-questions
MAX_MAGNITUDE = 10**15  # bounds every intermediate value: 9**9**9 style blow-ups stop early
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")
_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


class NotCheckable(ValueError):
    """A sub-question the env cannot check; the message is the reason shown to the policy."""


def safe_eval(text: str) -> Fraction:
    """The exact value of an arithmetic expression, or `NotCheckable` saying why not.

    >>> safe_eval("38 * 12 + 7"), safe_eval("(1 + 2) / 4")
    (Fraction(463, 1), Fraction(3, 4))
    """
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-").strip()
    if not text:
        raise NotCheckable("it is empty")
    if len(text) > MAX_EXPR_CHARS:
        raise NotCheckable(f"it is longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: a lone surrogate (UnicodeEncodeError) or a NUL byte
        raise NotCheckable("it is not an arithmetic expression") from None
    return _value(tree.body)


def _value(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        out = Fraction(str(node.value))  # str: 0.1 is 1/10, not its binary float
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        out = -_value(node.operand) if isinstance(node.op, ast.USub) else _value(node.operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Div) and right == 0:
            raise NotCheckable("it divides by zero")
        out = _OPS[type(node.op)](left, right)
    else:
        raise NotCheckable("only numbers, + - * / and parentheses can be evaluated")
    if abs(out) > MAX_MAGNITUDE:
        raise NotCheckable("a value in it is too large")
    return out


def parse_number(text: str) -> Fraction | None:
    """The answer in a sub-answer: the last ``\\boxed{}`` content or the last number in the text."""
    boxed = re.findall(r"\\boxed\{([^{}]*)\}", text)
    candidates = _NUMBER.findall(boxed[-1] if boxed else text)
    if not candidates:
        return None
    try:
        return Fraction(candidates[-1])
    except (ValueError, ZeroDivisionError):
        return None


def _norm(name: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", name.lower()).split())


@dataclass(frozen=True)
class SubQuestion:
    """An accepted sub-question: what is asked, and the value the env checks the answer against."""

    text: str
    value: Fraction
    kind: str  # "expression" | "quantity"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "value": str(self.value), "kind": self.kind}


def check_subquestion(line: str, known: list[dict[str, Any]], relevant_only: bool = True) -> SubQuestion:
    """Accept `line` as a sub-question of a task whose known steps are `known`, or raise `NotCheckable`.

    `known` is ``meta["steps"]``: dicts with ``value`` and optionally ``name``.
    With `relevant_only` (and known steps to compare with), an expression must
    evaluate to one of the task's intermediate quantities, so ``1 + 1`` cannot
    pad a decomposition of ``47 + 38 * 12``.
    """
    text = line.strip().rstrip("?").strip()
    text = re.sub(r"\s*=\s*$", "", text).strip()
    names = {_norm(str(s["name"])): s for s in known if s.get("name")}
    if _norm(text) in names:
        return SubQuestion(text, Fraction(names[_norm(text)]["value"]), "quantity")
    try:
        value = safe_eval(text)
    except NotCheckable as e:
        hint = f" nor one of this task's quantities ({', '.join(sorted(names))})" if names else ""
        raise NotCheckable(f"{e}{hint}") from None
    if _NUMBER.fullmatch(text.replace(" ", "")):
        raise NotCheckable("a bare number asks nothing")
    if relevant_only and known and value not in {Fraction(s["value"]) for s in known}:
        raise NotCheckable("its value is not one of this problem's intermediate quantities")
    return SubQuestion(text, value, "expression")
