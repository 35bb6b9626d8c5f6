"""The executable tools on their own: the safe calculator, units, dates, the store and document search."""

from __future__ import annotations

import sys
import time

import pytest

from argym.envs.toolcall.tools import TOOLS, ToolContext, ToolError, calculate, convert, documents, search


@pytest.mark.parametrize(
    "expr, value",
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("2 ** 10", 1024),
        ("2 ^ 3", 8),
        ("-3 + +4", 1),
        ("sqrt(16) + abs(-2)", 6.0),
        ("round(2.567, 2)", 2.57),
        ("max(1, 5, 3)", 5),
        ("10 / 4", 2.5),
    ],
)
def test_calculator_arithmetic(expr, value):
    assert calculate(expr) == value


@pytest.mark.parametrize(
    "expr, message",
    [
        ("__import__('os').system('id')", "Unsupported"),
        ("open('/etc/passwd')", "Unsupported"),
        ("(1).__class__", "Unsupported"),
        ("x + 1", "Unsupported"),
        ("'a' * 3", "Unsupported"),
        ("[1, 2]", "Unsupported"),
        ("lambda: 1", "Unsupported"),
        ("1 / 0", "Division by zero"),
        ("9 ** 9 ** 9", "power is too large"),
        ("10 ** 99 * 10 ** 99", "out of range"),
        ("1 +", "Cannot read"),
        ("sqrt(-1)", "sqrt"),
        ("(-8) ** 0.5", "out of range"),
        ("1" * 1001, "at most 1000"),
        ("(" * 400 + "1" + ")" * 400, "too many nested parentheses"),
        ("-" * 999 + "1", "nested too deeply"),
    ],
)
def test_calculator_refuses_what_is_not_arithmetic(expr, message):
    with pytest.raises(ToolError, match=message):
        calculate(expr)


def test_calculator_depth_bound_does_not_depend_on_the_recursion_limit():
    """Other imports raise the recursion limit; the depth bound must hold all the same."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        with pytest.raises(ToolError, match="nested too deeply"):
            calculate("-" * 999 + "1")
    finally:
        sys.setrecursionlimit(before)


@pytest.mark.parametrize(
    "expr, message",
    [
        ("round(1, -10**7)", "ndigits"),
        ("round(1, -10**8)", "ndigits"),
        ("round(1.5, 10**9)", "ndigits"),
        ("round(1, 0.5)", "ndigits"),
        ("99 ** 99 ** 2", "power is too large"),
        ("(10**99) ** 2", "power is too large"),
        ("1" * 200, "out of range"),
        ("1e999", "out of range"),
        ("1e308 * 10", "out of range"),
        ("exp(1000)", "exp"),
        ("log(10, 1)", "log"),
        ("floor(1e999)", "out of range"),
        ("1 << 10**9", "Unsupported"),
        ("factorial(10**6)", "Unsupported"),
        ("(10**99) // 1e-300", "out of range"),
    ],
)
def test_calculator_hostile_arguments_are_refused_at_once(expr, message):
    t0 = time.perf_counter()
    with pytest.raises(ToolError, match=message):
        calculate(expr)
    assert time.perf_counter() - t0 < 0.1


def test_calculator_round_error_quotes_the_ndigits_it_was_given():
    with pytest.raises(ToolError) as refused:
        calculate("round(1, -10**8)")
    assert str(refused.value) == "round: ndigits must be an integer from -100 to 100, got -100000000."


def test_calculator_nesting_within_the_parser_limit_evaluates():
    assert calculate("(" * 150 + "1" + ")" * 150) == 1


def test_units_and_temperatures():
    assert convert(1, "mi", "m") == pytest.approx(1609.344)
    assert convert(100, "C", "F") == pytest.approx(212)
    assert convert(2, "h", "min") == pytest.approx(120)
    with pytest.raises(ToolError, match="Cannot convert kg"):
        convert(1, "kg", "m")
    with pytest.raises(ToolError, match="different kinds"):
        convert(1, "C", "m")


def test_dates():
    ctx = ToolContext()
    assert TOOLS["date_add"].run({"date": "2024-02-28", "days": 2}, ctx) == "2024-03-01"
    assert TOOLS["date_diff"].run({"start": "2024-01-01", "end": "2023-12-25"}, ctx) == "-7"
    assert TOOLS["weekday"].run({"date": "2026-11-30"}, ctx) == "Monday"
    with pytest.raises(ToolError, match="not a date"):
        TOOLS["weekday"].run({"date": "30/11/2026"}, ctx)
    with pytest.raises(ToolError, match="out of range"):
        TOOLS["date_add"].run({"date": "9999-12-31", "days": 10}, ctx)


def test_key_value_store_is_per_context():
    a, b = ToolContext(store={"x": "1"}), ToolContext()
    assert TOOLS["kv_set"].run({"key": "y", "value": "2"}, a) == "ok"
    assert TOOLS["kv_get"].run({"key": "y"}, a) == "2" and a.store == {"x": "1", "y": "2"}
    with pytest.raises(ToolError, match="No key 'y'"):
        TOOLS["kv_get"].run({"key": "y"}, b)


def test_search_finds_the_town_by_name():
    docs = documents()
    assert len(docs) == 40 and len({d["title"] for d in docs}) == 40
    for doc in docs:
        assert search(doc["title"])[0]["id"] == doc["id"]
        assert str(doc["facts"]["elevation_m"]) in doc["text"] and doc["facts"]["founded"] in doc["text"]
    assert TOOLS["search_docs"].run({"query": "zzzz"}, ToolContext()) == "No documents match."


def test_every_tool_schema_is_an_openai_function_tool():
    for name, tool in TOOLS.items():
        schema = tool.schema()
        assert schema["type"] == "function" and schema["function"]["name"] == name
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
