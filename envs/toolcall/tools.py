"""The executable tools of argym/ToolCall-v0: real functions that run on the agent's arguments.

- ``calculator``: arithmetic on a safe expression evaluator (Python's `ast`,
  a whitelist of nodes and functions, bounded powers and sizes; no `eval`);
- ``python``: a program run in argym's sandbox (`argym.envs.sandbox`, the
  process backend by default) with a wall-clock limit; its stdout comes back;
- ``convert_units``: length, mass, time and temperature;
- ``date_add``, ``date_diff``, ``weekday``: date arithmetic on ISO dates;
- ``kv_get``, ``kv_set``: a per-episode key-value store (seeded by the task);
- ``search_docs``: keyword search over the small document collection shipped
  with argym (``data/documents.json``, fictional towns).

A tool answers a string. Whatever the agent's arguments make a tool do (raise,
overflow, time out) is a `ToolError`, reported to the agent and scored as its
failure; only a sandbox that cannot run is an infrastructure failure
(`SandboxError` passes through).

The stateless tools (``Tool.stateless``: all but the store and ``python``) run
in a `WorkerPool` (`run_tool`, `tool_pool`), not in the env's process: their
own bounds keep each call to microseconds, and the parent's hard deadline
(`ToolCallEnv.timeout_s`) stops whatever a bound missed without holding the
env's GIL. A worker that dies is an infrastructure failure.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from argym.envs.executors import WorkerPool, register_pool
from argym.errors import ArgymError


class ToolError(ArgymError):
    """The tool could not do what the arguments asked; the message goes back to the agent."""


@dataclass
class ToolContext:
    """Per-episode state the tools share: the key-value store and a way to reach the sandbox."""

    store: dict[str, str] = field(default_factory=dict)
    sandbox: Callable[[], Any] | None = None
    timeout_s: float = 5.0


@dataclass(frozen=True)
class Tool:
    """A tool: its OpenAI function schema and the function that runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], ToolContext], str]
    stateless: bool = True
    """runs on its arguments alone, so it can run in a worker process (`run_tool`)"""

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


# ---- calculator ----------------------------------------------------------------------------------

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "exp": math.exp,
}
_MAX_MAGNITUDE = 1e100
"""Every number (constant, intermediate, result) stays within this, so each operation costs microseconds."""
_MAX_DEPTH = 100
"""Syntax-tree depth; checked explicitly, since the interpreter's recursion limit is whatever imports set."""
_MAX_NDIGITS = 100
"""`round`'s ndigits: ``round(1, -10**8)`` builds a 10**8-digit power of ten (a minute of CPU)."""


def calculate(expression: str) -> int | float:
    """Evaluate arithmetic (+ - * / // % **, parentheses, a few math functions) without `eval`.

    Every input is bounded before work is done on it (length, depth, magnitudes,
    powers, `round`'s digits), so no expression of at most 1000 characters runs long.
    """
    if len(expression) > 1000:
        raise ToolError(f"The expression is {len(expression)} characters; at most 1000 are allowed.")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as e:
        raise ToolError(f"Cannot read the expression {expression[:80]!r}: {e.msg}.") from None
    except (RecursionError, MemoryError):  # the parser's own stack
        raise ToolError("The expression is nested too deeply.") from None
    if _depth(tree.body) > _MAX_DEPTH:
        raise ToolError(f"The expression is nested too deeply (more than {_MAX_DEPTH} levels).")
    return _eval(tree.body)


def _depth(root: ast.AST) -> int:
    """The syntax tree's depth, without recursion; stops counting past `_MAX_DEPTH`."""
    deepest, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= _MAX_DEPTH:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if (
            isinstance(node.op, ast.Pow)
            and abs(left) > 1
            and right > 0
            and right * math.log10(abs(left)) > math.log10(_MAX_MAGNITUDE)
        ):
            raise ToolError("The power is too large.")
        try:
            value = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("Division by zero.") from None
        except (OverflowError, ValueError) as e:
            raise ToolError(f"Arithmetic error: {e}.") from None
        return _bounded(value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
        and len(node.args) <= 4
    ):
        name, args = node.func.id, [_eval(a) for a in node.args]
        if name == "round" and len(args) == 2 and not (type(args[1]) is int and abs(args[1]) <= _MAX_NDIGITS):
            raise ToolError(
                f"round: ndigits must be an integer from -{_MAX_NDIGITS} to {_MAX_NDIGITS}, got {args[1]!r}."
            )
        try:
            return _bounded(_FUNCS[name](*args))
        except (TypeError, ValueError, OverflowError, ZeroDivisionError) as e:
            raise ToolError(f"{name}: {e}.") from None
    raise ToolError(
        f"Unsupported in an expression: {ast.dump(node)[:80]}. Use numbers, + - * / // % **, "
        f"parentheses and {', '.join(_FUNCS)}."
    )


def _bounded(value: Any) -> int | float:
    if (
        isinstance(value, complex)
        or (isinstance(value, float) and not math.isfinite(value))
        or abs(value) > _MAX_MAGNITUDE
    ):
        raise ToolError(f"The result is out of range (numbers are limited to ±{_MAX_MAGNITUDE:g}).")
    return value


def _number(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(round(value, 10)) if isinstance(value, float) else str(value)


def _calculator(args: dict[str, Any], ctx: ToolContext) -> str:
    return _number(calculate(args["expression"]))


# ---- python in the sandbox -----------------------------------------------------------------------


def _python(args: dict[str, Any], ctx: ToolContext) -> str:
    from argym.envs.sandbox.base import Limits

    if ctx.sandbox is None:
        raise ToolError("The python tool has no sandbox in this env.")
    result = ctx.sandbox().run(
        ["python", "main.py"],
        files={"main.py": args["code"]},
        limits=Limits(timeout_s=ctx.timeout_s, memory_mb=512, output_bytes=64_000),
    )
    if result.timed_out:
        raise ToolError(f"The program did not finish within {ctx.timeout_s:g} s and was stopped.")
    if result.oom:
        raise ToolError("The program ran out of memory.")
    out = (result.stdout or "")[-4000:]
    if result.signal is not None:
        raise ToolError(f"The program was killed by signal {result.signal}.")
    if result.exit_code != 0:
        raise ToolError(
            f"The program failed (exit code {result.exit_code}):\n{(result.stderr or '')[-2000:]}"
        )
    return out if out.strip() else "(the program printed nothing; print the result)"


# ---- units and dates -----------------------------------------------------------------------------

_UNITS: dict[str, tuple[str, float]] = {  # unit -> (dimension, factor to the SI unit)
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
}
_TEMPS = ("C", "F", "K")


def convert(value: float, src: str, dst: str) -> float:
    if src in _TEMPS or dst in _TEMPS:
        if src not in _TEMPS or dst not in _TEMPS:
            raise ToolError(f"Cannot convert {src} to {dst}: different kinds of quantity.")
        kelvin = {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[src]
        return {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[dst]
    (a, fa), (b, fb) = _UNITS[src], _UNITS[dst]
    if a != b:
        raise ToolError(f"Cannot convert {src} ({a}) to {dst} ({b}).")
    return value * fa / fb


def _convert_units(args: dict[str, Any], ctx: ToolContext) -> str:
    return _number(round(convert(float(args["value"]), args["from_unit"], args["to_unit"]), 6))


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ToolError(f"{text!r} is not a date in YYYY-MM-DD form.") from None


def _date_add(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        return (_date(args["date"]) + dt.timedelta(days=args["days"])).isoformat()
    except OverflowError:
        raise ToolError("The resulting date is out of range.") from None


def _date_diff(args: dict[str, Any], ctx: ToolContext) -> str:
    return str((_date(args["end"]) - _date(args["start"])).days)


def _weekday(args: dict[str, Any], ctx: ToolContext) -> str:
    return _date(args["date"]).strftime("%A")


# ---- key-value store and document search ---------------------------------------------------------


def _kv_get(args: dict[str, Any], ctx: ToolContext) -> str:
    if args["key"] not in ctx.store:
        raise ToolError(
            f"No key {args['key']!r} in the store. Keys: {', '.join(sorted(ctx.store)) or 'none'}."
        )
    return ctx.store[args["key"]]


def _kv_set(args: dict[str, Any], ctx: ToolContext) -> str:
    if len(ctx.store) >= 1000 and args["key"] not in ctx.store:
        raise ToolError("The store is full (1000 keys).")
    ctx.store[args["key"]] = str(args["value"])[:10_000]
    return "ok"


@lru_cache(maxsize=1)
def documents() -> tuple[dict[str, Any], ...]:
    """The shipped document collection (fictional towns)."""
    path = Path(__file__).parent / "data" / "documents.json"
    return tuple(json.loads(path.read_text(encoding="utf-8"))["documents"])


_WORD = re.compile(r"[a-z0-9]+")


def search(query: str, k: int = 3) -> list[dict[str, Any]]:
    """The `k` documents sharing the most words with `query`, a title match first."""
    words = set(_WORD.findall(query.lower()))
    scored = []
    for i, doc in enumerate(documents()):
        title = set(_WORD.findall(doc["title"].lower()))
        score = 10 * len(words & title) + len(words & set(_WORD.findall(doc["text"].lower())))
        if score:
            scored.append((-score, i, doc))
    return [d for _, _, d in sorted(scored)[:k]]


def _search_docs(args: dict[str, Any], ctx: ToolContext) -> str:
    hits = search(args["query"][:500])
    if not hits:
        return "No documents match."
    return "\n".join(f"[{d['id']}] {d['title']}: {d['text']}" for d in hits)


# ---- the registry --------------------------------------------------------------------------------

_UNIT_NAMES = list(_UNITS) + list(_TEMPS)
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "calculator",
            "Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, round, ...).",
            _obj(["expression"], expression={"type": "string"}),
            _calculator,
        ),
        Tool(
            "python",
            "Run a Python program in a sandbox and return what it prints.",
            _obj(["code"], code={"type": "string"}),
            _python,
            stateless=False,
        ),
        Tool(
            "convert_units",
            "Convert a value between units of length, mass, time or temperature.",
            _obj(
                ["value", "from_unit", "to_unit"],
                value={"type": "number"},
                from_unit={"type": "string", "enum": _UNIT_NAMES},
                to_unit={"type": "string", "enum": _UNIT_NAMES},
            ),
            _convert_units,
        ),
        Tool(
            "date_add",
            "The date a number of days after (or before, if negative) a YYYY-MM-DD date.",
            _obj(["date", "days"], date={"type": "string"}, days={"type": "integer"}),
            _date_add,
        ),
        Tool(
            "date_diff",
            "Days from start to end (YYYY-MM-DD dates); negative if end is earlier.",
            _obj(["start", "end"], start={"type": "string"}, end={"type": "string"}),
            _date_diff,
        ),
        Tool(
            "weekday",
            "The day of the week of a YYYY-MM-DD date.",
            _obj(["date"], date={"type": "string"}),
            _weekday,
        ),
        Tool(
            "kv_get",
            "Read a value from the key-value store.",
            _obj(["key"], key={"type": "string"}),
            _kv_get,
            stateless=False,
        ),
        Tool(
            "kv_set",
            "Write a value to the key-value store.",
            _obj(["key", "value"], key={"type": "string"}, value={"type": "string"}),
            _kv_set,
            stateless=False,
        ),
        Tool(
            "search_docs",
            "Search the document collection (towns); returns the best 3 matches.",
            _obj(["query"], query={"type": "string"}),
            _search_docs,
        ),
    )
}

TOOL_FN = "argym.envs.toolcall.tools:run_tool"


def run_tool(name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """A stateless tool's answer in a worker process: (True, text) or (False, what went wrong).

    Whatever the arguments make the tool raise is the agent's failure, so it
    comes back as a value; only the worker's death reaches the caller as an error.
    """
    tool = TOOLS[name]
    if not tool.stateless:
        raise ValueError(f"The tool {name!r} keeps state in the env; it cannot run in a worker.")
    try:
        return True, tool.run(arguments, ToolContext())
    except ToolError as e:
        return False, str(e)
    except Exception as e:  # a tool's own bug on odd arguments is still the agent's failure to avoid
        return False, f"{type(e).__name__}: {e}"


@register_pool("tools")
def tool_pool(workers: int | None = None, deadline_s: float = 5.0) -> WorkerPool:
    """A pool running `run_tool`, warmed up so that imports do not count against the deadline."""
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    return WorkerPool(
        TOOL_FN, workers=workers, deadline_s=deadline_s, warmup=("calculator", {"expression": "1"})
    )
