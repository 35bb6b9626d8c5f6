"""argym's AST-style checker for BFCL's single-turn categories.

The rules are those of the Berkeley Function Calling Leaderboard's AST
evaluation (Patil et al., "The Berkeley Function Calling Leaderboard",
ICML 2025; the `bfcl-eval` package), written here from their description:

- the number of calls equals the number of ground-truth calls; parallel
  categories match calls to ground truth in any order (argym searches every
  assignment, BFCL takes the first match greedily: a documented difference
  that only matters when one call could match two ground-truth entries);
- each call names the ground truth's function, passes every required
  parameter, and no parameter that the function or the ground truth lacks;
- each value has the documented type (Python types of BFCL's type names,
  ``int`` accepted where ``float`` is expected, a list where ``tuple`` is;
  list items checked one level deep) or the type of the allowed values
  (BFCL's "variable" case);
- each value is one of the allowed values; strings (also inside lists and
  dicts) compare case-insensitively with spaces and ``,./-_*^`` removed;
- a ground-truth parameter the call omits must allow ``""`` (optional);
- irrelevance: the right answer is no call at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import permutations
from typing import Any

PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_STRIP = re.compile(r"[ ,./\-_*^]")
_NONE = object()  # "no allowed value besides the empty (optional) marker"; None itself can be allowed


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one turn's calls; `error` says what did not match (empty when valid)."""

    valid: bool
    error: str = ""


def check_calls(
    functions: list[dict[str, Any]],
    calls: list[tuple[str, dict[str, Any]]],
    ground_truth: list[dict[str, dict[str, list[Any]]]] | None,
) -> CheckResult:
    """Grade `calls` (name, arguments) against BFCL's possible answers; None ground truth means irrelevance."""
    if ground_truth is None:
        if calls:
            return CheckResult(False, f"No tool fits this request, but {len(calls)} call(s) were made.")
        return CheckResult(True)
    if len(calls) != len(ground_truth):
        return CheckResult(False, f"Expected {len(ground_truth)} call(s), got {len(calls)}.")
    docs = {f["name"]: f for f in functions}
    # one result per (ground truth, call) pair; then find an assignment where every pair is valid
    table = [[_check_one(docs, call, gt) for call in calls] for gt in ground_truth]
    if len(calls) <= 7:
        for order in permutations(range(len(calls))):
            if all(table[g][c].valid for g, c in enumerate(order)):
                return CheckResult(True)
    elif _has_matching(table):
        return CheckResult(True)
    for g, row in enumerate(table):
        if not any(r.valid for r in row):
            name = next(iter(ground_truth[g]))
            return CheckResult(
                False,
                f"No call matches expected call {g + 1} ({name}): {row[0].error}"
                if len(row) == 1
                else f"No call matches expected call {g + 1} ({name}).",
            )
    return CheckResult(False, "The calls match the expected ones only by reusing a call twice.")


def _has_matching(table: list[list[CheckResult]]) -> bool:
    """A perfect matching exists (Kuhn's augmenting paths), for turns with many calls."""
    owner: dict[int, int] = {}

    def augment(g: int, seen: set[int]) -> bool:
        for c, r in enumerate(table[g]):
            if r.valid and c not in seen:
                seen.add(c)
                if c not in owner or augment(owner[c], seen):
                    owner[c] = g
                    return True
        return False

    return all(augment(g, set()) for g in range(len(table)))


def _check_one(
    docs: dict[str, dict[str, Any]], call: tuple[str, dict[str, Any]], gt: dict[str, dict[str, list[Any]]]
) -> CheckResult:
    name, args = call
    want, allowed = next(iter(gt.items()))
    if name != want:
        return CheckResult(False, f"Expected a call to {want!r}, got {name!r}.")
    doc = docs.get(want)
    if doc is None:
        return CheckResult(False, f"Function {want!r} is not documented in the task.")
    params = doc.get("parameters") or {}
    props = params.get("properties") or {}
    for p in params.get("required") or []:
        if p not in args:
            return CheckResult(False, f"Missing required parameter {p!r}.")
    for p, value in args.items():
        if p not in props or p not in allowed:
            return CheckResult(False, f"Unexpected parameter {p!r}.")
        problem = _check_value(p, value, props[p], allowed[p])
        if problem:
            return CheckResult(False, problem)
    for p, values in allowed.items():
        if p not in args and "" not in values:
            return CheckResult(False, f"Parameter {p!r} must be given.")
    return CheckResult(True)


def _as_bfcl_reads(value: Any, type_name: str) -> Any:
    """`value` as BFCL compares it: an int where a float is expected is that float, a tuple a list."""
    if type_name == "float" and type(value) is int:  # BFCL's int -> float leniency
        return float(value)
    if type_name == "tuple" and type(value) is tuple:
        return list(value)
    return value


def _check_value(param: str, value: Any, prop: dict[str, Any], allowed: list[Any]) -> str | None:
    type_name = prop.get("type", "any")
    expected = PY_TYPES.get(type_name, str)
    value = _as_bfcl_reads(value, type_name)
    sample = next((a for a in allowed if a != ""), _NONE)
    variable = sample is not _NONE and type(sample) is not expected
    exact = type(value) is expected  # a bool: `type(value) is expected` would narrow `value` to object
    if exact:
        items = (
            PY_TYPES.get((prop.get("items") or {}).get("type", ""))
            if type_name in ("array", "tuple")
            else None
        )
        if items is not None and not _items_ok(value, items, allowed):
            return f"Wrong item types in {param!r}: expected {type_name} of {prop['items']['type']}, got {value!r}."
    elif not (sample is not _NONE and type(value) is type(sample)):
        return f"Wrong type for {param!r}: expected {type_name}, got {type(value).__name__} ({value!r})."
    else:
        variable = True
    if not variable:
        if expected is dict:
            return None if _dict_ok(value, allowed) else f"Wrong value for {param!r}: {value!r}."
        if expected is list and (prop.get("items") or {}).get("type") == "dict":
            ok = any(
                isinstance(a, list)
                and len(a) == len(value)
                and all(_dict_ok(v, [d]) for v, d in zip(value, a))
                for a in allowed
            )
            return None if ok else f"Wrong value for {param!r}: {value!r}."
        if expected in (str, list):
            ok = _norm(value) in [_norm(a) for a in allowed if type(a) is type(value)]
            return None if ok else f"Wrong value for {param!r}: {value!r}; expected one of {allowed!r}."
    return None if value in allowed else f"Wrong value for {param!r}: {value!r}; expected one of {allowed!r}."


def _items_ok(value: list[Any], item_type: type, allowed: list[Any]) -> bool:
    """BFCL checks list items one level deep, against the documented item type or the allowed items' type."""
    for a in allowed:
        if not isinstance(a, list):
            return True
        sample = next((x for x in a if x != ""), _NONE)
        if all(type(v) is item_type or (sample is not _NONE and type(v) is type(sample)) for v in value):
            return True
    return False


def _dict_ok(value: Any, allowed: list[Any]) -> bool:
    """A dict value matches one allowed dict: known keys, allowed values, omitted keys optional."""
    if not isinstance(value, dict):
        return False
    for option in allowed:
        if not isinstance(option, dict):
            continue
        if all(k in option and _norm(v) in [_norm(a) for a in option[k]] for k, v in value.items()) and all(
            k in value or "" in vs for k, vs in option.items()
        ):
            return True
    return False


def _norm(value: Any) -> Any:
    """BFCL's string standardisation (case, spaces and ``,./-_*^`` ignored; ' read as \"), also inside lists."""
    if isinstance(value, str):
        return _STRIP.sub("", value).lower().replace("'", '"')
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value
