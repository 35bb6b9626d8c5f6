"""Executable multi-step tool tasks: procedurally generated, seeded, unlimited, with disjoint splits.

Each task needs 2-6 real tool calls (`argym.envs.toolcall.tools`) and has a
verifiable final answer. The generator knows the shipped documents and the
task's key-value store, so it writes the scripted solution (``meta["plan"]``:
a list of turns, each a list of calls) and the answer together; the oracle
replays the plan and then states the answer. Kinds (``meta["kind"]``):

- ``population_sum``: two or three searches, then the calculator;
- ``elevation_feet``: two searches, the calculator, then a unit conversion (rounded);
- ``founding_gap``: two searches, then ``date_diff``;
- ``founding_weeks``: two searches, ``date_diff``, then the calculator;
- ``anniversary_weekday``: a search, ``date_add``, then ``weekday``;
- ``order_total``: ``kv_get`` prices from the task's store, the calculator, then ``kv_set`` of the
  total (success also needs the saved value: ``meta["expect_store"]``);
- ``prime_count``: two searches, then a Python program in the sandbox.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np

from argym.envs.tasks import ProceduralSource
from argym.envs.toolcall.tools import TOOLS, documents
from argym.errors import ConfigError
from argym.types import Task

KINDS = (
    "population_sum",
    "elevation_feet",
    "founding_gap",
    "founding_weeks",
    "anniversary_weekday",
    "order_total",
    "prime_count",
)
ITEMS = ("widget", "gadget", "bolt", "spring", "lamp", "valve", "gear", "cable")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _search(doc: dict[str, Any]) -> dict[str, Any]:
    return _call("search_docs", query=doc["title"])


def make_task(index: int, kinds: tuple[str, ...] = KINDS) -> Task:
    """The task of `index`: a pure function of the index (and the kinds allowed)."""
    rng = np.random.default_rng([index, 7])
    kind = kinds[int(rng.integers(len(kinds)))]
    docs = documents()
    picks = [docs[int(i)] for i in rng.choice(len(docs), size=3, replace=False)]
    a, b, c = picks
    fa, fb = a["facts"], b["facts"]
    store: dict[str, str] = {}
    tools: tuple[str, ...]  # the tools the task needs
    if kind == "population_sum":
        towns = picks[: 2 + int(rng.integers(2))]
        names = [t["title"] for t in towns]
        question = f"What is the combined population of {', '.join(names[:-1])} and {names[-1]}?"
        total = sum(t["facts"]["population"] for t in towns)
        expr = " + ".join(str(t["facts"]["population"]) for t in towns)
        plan = [[_search(t)] for t in towns] + [[_call("calculator", expression=expr)]]
        answer, tools = str(total), ("search_docs", "calculator")
    elif kind == "elevation_feet":
        high, low = sorted([a, b], key=lambda d: -d["facts"]["elevation_m"])
        gap = high["facts"]["elevation_m"] - low["facts"]["elevation_m"]
        question = (
            f"How many feet higher above sea level is the higher of {a['title']} and {b['title']}? "
            f"Round to the nearest foot."
        )
        plan = [
            [_search(a)],
            [_search(b)],
            [
                _call(
                    "calculator", expression=f"{high['facts']['elevation_m']} - {low['facts']['elevation_m']}"
                )
            ],
            [_call("convert_units", value=gap, from_unit="m", to_unit="ft")],
        ]
        answer, tools = str(round(gap / 0.3048)), ("search_docs", "calculator", "convert_units")
    elif kind in ("founding_gap", "founding_weeks"):
        first, second = sorted([a, b], key=lambda d: d["facts"]["founded"])
        days = (
            dt.date.fromisoformat(second["facts"]["founded"])
            - dt.date.fromisoformat(first["facts"]["founded"])
        ).days
        plan = [
            [_search(a)],
            [_search(b)],
            [_call("date_diff", start=first["facts"]["founded"], end=second["facts"]["founded"])],
        ]
        if kind == "founding_gap":
            question = (
                f"How many days passed between the founding of {a['title']} and the founding of {b['title']}?"
            )
            answer, tools = str(days), ("search_docs", "date_diff")
        else:
            question = (
                f"How many whole weeks passed between the founding of {a['title']} and the founding "
                f"of {b['title']}?"
            )
            plan.append([_call("calculator", expression=f"{days} // 7")])
            answer, tools = str(days // 7), ("search_docs", "date_diff", "calculator")
    elif kind == "anniversary_weekday":
        n = int(rng.integers(100, 20000))
        day = dt.date.fromisoformat(fa["founded"]) + dt.timedelta(days=n)
        question = f"On which day of the week did {a['title']} reach {n} days since its founding?"
        plan = [
            [_search(a)],
            [_call("date_add", date=fa["founded"], days=n)],
            [_call("weekday", date=day.isoformat())],
        ]
        answer, tools = day.strftime("%A"), ("search_docs", "date_add", "weekday")
    elif kind == "order_total":
        items = [ITEMS[int(i)] for i in rng.choice(len(ITEMS), size=4, replace=False)]
        for item in items:
            store[f"price:{item}"] = str(int(rng.integers(2, 200)))
        x, y = items[:2]
        qx, qy = int(rng.integers(1, 20)), int(rng.integers(1, 20))
        question = (
            f"The key-value store holds unit prices under keys like 'price:{items[2]}'. "
            f"What do {qx} {x}s and {qy} {y}s cost in total? Also save the total under the key 'order:total'."
        )
        px, py = int(store[f"price:{x}"]), int(store[f"price:{y}"])
        answer = str(qx * px + qy * py)
        plan = [
            [_call("kv_get", key=f"price:{x}")],
            [_call("kv_get", key=f"price:{y}")],
            [_call("calculator", expression=f"{qx} * {px} + {qy} * {py}")],
            [_call("kv_set", key="order:total", value=answer)],
        ]
        tools = ("kv_get", "kv_set", "calculator")
    elif kind == "prime_count":
        lo, hi = sorted([fa["population"] // 100, fb["population"] // 100])
        question = (
            f"Divide the populations of {a['title']} and {b['title']} by 100, rounding down. "
            f"How many prime numbers lie strictly between the two results?"
        )
        code = (
            f"lo, hi = {lo}, {hi}\n"
            "print(sum(all(k % d for d in range(2, int(k ** 0.5) + 1)) for k in range(max(lo + 1, 2), hi)))"
        )
        plan = [[_search(a)], [_search(b)], [_call("python", code=code)]]
        count = sum(all(k % d for d in range(2, int(k**0.5) + 1)) for k in range(max(lo + 1, 2), hi))
        answer, tools = str(count), ("search_docs", "python")
    else:
        raise ConfigError(f"Unknown executable task kind {kind!r}; choose from {', '.join(KINDS)}.")
    return Task(
        id=f"executable#{index}",
        prompt=({"role": "user", "content": question},),
        answer=answer,
        tools=tuple(TOOLS[t].schema() for t in tools),
        meta={
            "source": "executable",
            "kind": kind,
            "plan": plan,
            "store": store,
            "expect_store": {"order:total": answer} if kind == "order_total" else {},
            "answer_type": "weekday" if kind == "anniversary_weekday" else "number",
        },
    )


def executable_source(test_size: int = 200, kinds: str | list[str] | None = None) -> ProceduralSource:
    """The procedural source; `kinds` (a list, or names joined by ``+``) restricts the task kinds."""
    chosen = tuple(KINDS if kinds is None else (kinds.split("+") if isinstance(kinds, str) else kinds))
    unknown = [k for k in chosen if k not in KINDS]
    if unknown or not chosen:
        raise ConfigError(f"Unknown executable task kinds {unknown}; choose from {', '.join(KINDS)}.")
    name = "executable" if chosen == KINDS else f"executable/{'+'.join(chosen)}"
    return ProceduralSource(name, lambda i: make_task(i, chosen), test_size=int(test_size))
