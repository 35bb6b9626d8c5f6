"""The shop a Support-v0 task happens in: customers, products and orders, generated from the task's index.

Each task is a small world (four customers, two or three orders each) and one
customer's goal, both a pure function of the index, so the same index gives
the same database on every machine. The rows live in ``task.meta`` (never
shown to the agent); each episode loads them into a fresh in-memory SQLite
database (`open_db`), so episodes never share state.

Goal kinds (``meta["goal"]["kind"]``), after τ-bench's retail domain (arXiv 2406.12045):

- ``cancel``: a pending order is cancelled; the user must be told the refund (the order total);
- ``address``: a pending order's shipping address is changed to the user's new one;
- ``return``: a delivered order within the return window is returned; the user is told the refund;
- ``status``: nothing changes; the user must be told the order's status;
- ``refuse_cancel``: the user asks to cancel an order that has already shipped: the policy forbids it,
  so nothing changes and the user must be told the order's status;
- ``refuse_return``: the user asks to return an order delivered more than 30 days ago: nothing changes,
  and the user must be told the 30-day rule.
"""

from __future__ import annotations

import copy
import functools
import sqlite3
from typing import Any

import numpy as np

from argym.envs.tasks import ProceduralSource
from argym.types import Task

RETURN_DAYS = 30
KINDS = ("cancel", "address", "return", "status", "refuse_cancel", "refuse_return")
WRITE_KINDS = {"cancel": "cancelled", "address": "pending", "return": "returned"}
"""Goal kinds that change an order, and the status the order ends in."""

FIRST = (
    "Ava",
    "Liam",
    "Noah",
    "Emma",
    "Mia",
    "Lucas",
    "Sofia",
    "Omar",
    "Yuki",
    "Ines",
    "Ravi",
    "Chloe",
    "Mateo",
    "Hana",
    "Leon",
    "Amara",
    "Ivan",
    "Zoe",
    "Kofi",
    "Nora",
    "Ethan",
    "Lea",
    "Arjun",
    "Maya",
)
LAST = (
    "Lopez",
    "Smith",
    "Kim",
    "Garcia",
    "Muller",
    "Rossi",
    "Chen",
    "Ahmed",
    "Silva",
    "Novak",
    "Sato",
    "Brown",
    "Okafor",
    "Dubois",
    "Khan",
    "Moreau",
    "Jensen",
    "Costa",
    "Ito",
    "Patel",
    "Wright",
    "Haas",
)
STREETS = ("Oak St", "Pine Ave", "Maple Rd", "Cedar Ln", "Elm St", "Birch Way", "Lake Dr", "Hill Rd")
CITIES = ("Springfield", "Riverton", "Lakeside", "Fairview", "Greenville", "Oakdale")
PRODUCTS = (
    ("desk lamp", 34.50),
    ("water bottle", 18.00),
    ("backpack", 59.90),
    ("headphones", 89.00),
    ("yoga mat", 27.25),
    ("coffee grinder", 45.80),
    ("phone case", 12.99),
    ("wall clock", 23.40),
    ("running shoes", 74.00),
    ("notebook set", 9.75),
    ("kettle", 31.60),
    ("bike light", 16.45),
)
OPENINGS = {
    "cancel": "Hi, this is {name}. I'd like to cancel an order, please.",
    "address": "Hello, I'm {name}. I need to change the shipping address of an order.",
    "return": "Hi, my name is {name}. I want to return an order I received.",
    "status": "Hello, {name} here. Can you tell me the status of one of my orders?",
    "refuse_cancel": "Hi, I'm {name}. Please cancel one of my orders.",
    "refuse_return": "Hello, this is {name}. I'd like to return something I bought a while ago.",
}
PERSONAS = ("polite and brief", "in a hurry", "a little anxious", "chatty", "direct")


def _address(rng: np.random.Generator) -> str:
    return (
        f"{int(rng.integers(1, 999))} {STREETS[int(rng.integers(len(STREETS)))]}, "
        f"{CITIES[int(rng.integers(len(CITIES)))]}"
    )


def make_world(index: int) -> dict[str, Any]:
    """Customers, orders and one customer's goal for task `index` (JSON-able; a pure function of it)."""
    return copy.deepcopy(_world(index))


@functools.lru_cache(
    maxsize=4096
)  # a pure function of the index: every env instance builds the same test split
def _world(index: int) -> dict[str, Any]:
    rng = np.random.default_rng([index, 46])
    names: set[str] = set()
    customers: list[dict[str, Any]] = []
    orders: list[dict[str, Any]] = []
    while len(customers) < 4:
        first, last = FIRST[int(rng.integers(len(FIRST)))], LAST[int(rng.integers(len(LAST)))]
        if f"{first} {last}" in names:
            continue
        names.add(f"{first} {last}")
        cid = f"{first.lower()}_{last.lower()}_{int(rng.integers(1000, 9999))}"
        customers.append(
            {
                "customer_id": cid,
                "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}{int(rng.integers(1, 99))}@example.com",
                "zip_code": f"{int(rng.integers(10000, 99999))}",
                "address": _address(rng),
            }
        )
    for c in customers:
        for _ in range(int(rng.integers(2, 4))):
            picks = rng.choice(len(PRODUCTS), size=int(rng.integers(1, 4)), replace=False)
            items = [PRODUCTS[int(i)][0] for i in picks]
            total = round(sum(PRODUCTS[int(i)][1] for i in picks), 2)
            status = ("pending", "shipped", "delivered")[int(rng.integers(3))]
            orders.append(
                {
                    "order_id": f"#W{int(rng.integers(1_000_000, 9_999_999))}",
                    "customer_id": c["customer_id"],
                    "status": status,
                    "items": ", ".join(items),
                    "total": total,
                    "address": c["address"],
                    "days_since_delivery": int(rng.integers(1, 60)) if status == "delivered" else None,
                }
            )
    kind = KINDS[int(rng.integers(len(KINDS)))]
    user = customers[int(rng.integers(len(customers)))]
    mine = [o for o in orders if o["customer_id"] == user["customer_id"]]
    target = mine[int(rng.integers(len(mine)))]
    _fit(target, kind, rng)  # the target order is made to fit the goal (a pending order to cancel, ...)
    goal: dict[str, Any] = {"kind": kind, "order_id": target["order_id"]}
    if kind == "address":
        goal["new_address"] = _address(rng)
    goal["must_tell"] = _must_tell(kind, target)
    return {
        "customers": customers,
        "orders": orders,
        "user": {**user, "persona": PERSONAS[int(rng.integers(len(PERSONAS)))]},
        "goal": goal,
    }


def _fit(order: dict[str, Any], kind: str, rng: np.random.Generator) -> None:
    if kind in ("cancel", "address"):
        order.update(status="pending", days_since_delivery=None)
    elif kind == "return":
        order.update(status="delivered", days_since_delivery=int(rng.integers(1, RETURN_DAYS + 1)))
    elif kind == "refuse_cancel":
        order.update(status="shipped", days_since_delivery=None)
    elif kind == "refuse_return":
        order.update(status="delivered", days_since_delivery=int(rng.integers(RETURN_DAYS + 1, 90)))


def money(x: float) -> str:
    return f"${x:.2f}"


def _must_tell(kind: str, order: dict[str, Any]) -> list[str]:
    """What the agent must say to the user for the task to count as done (τ-bench's required outputs)."""
    if kind in ("cancel", "return"):
        return [money(order["total"])]
    if kind in ("status", "refuse_cancel"):
        return [order["status"]]
    if kind == "refuse_return":
        return [f"{RETURN_DAYS} days"]
    return []


def goal_orders(world: dict[str, Any]) -> list[dict[str, Any]]:
    """The orders table as it must end: the goal applied to the initial rows."""
    orders = copy.deepcopy(world["orders"])
    goal = world["goal"]
    for o in orders:
        if o["order_id"] == goal["order_id"]:
            if goal["kind"] in ("cancel", "return"):
                o["status"] = WRITE_KINDS[goal["kind"]]
            elif goal["kind"] == "address":
                o["address"] = goal["new_address"]
    return orders


SCHEMA = (
    "CREATE TABLE customers (customer_id TEXT PRIMARY KEY, name TEXT, email TEXT, zip_code TEXT, address TEXT)",
    "CREATE TABLE orders (order_id TEXT PRIMARY KEY, customer_id TEXT, status TEXT, items TEXT, total REAL, "
    "address TEXT, days_since_delivery INTEGER)",
)
ORDER_COLUMNS = ("order_id", "customer_id", "status", "items", "total", "address", "days_since_delivery")


def open_db(world: dict[str, Any]) -> sqlite3.Connection:
    """A fresh in-memory database holding the world's rows (one per episode)."""
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.row_factory = sqlite3.Row
    for statement in SCHEMA:
        db.execute(statement)
    db.executemany(
        "INSERT INTO customers VALUES (:customer_id, :name, :email, :zip_code, :address)", world["customers"]
    )
    db.executemany(
        "INSERT INTO orders VALUES (:order_id, :customer_id, :status, :items, :total, :address, "
        ":days_since_delivery)",
        world["orders"],
    )
    db.commit()
    return db


def orders_in(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """The orders table now, in insertion order (compared with `goal_orders`)."""
    return [dict(r) for r in db.execute(f"SELECT {', '.join(ORDER_COLUMNS)} FROM orders ORDER BY rowid")]


def make_task(index: int, prompt_head: tuple[dict[str, Any], ...] = ()) -> Task:
    """Task `index`: the opening user message after `prompt_head` (the policy), the world in meta."""
    world = make_world(index)
    opening = OPENINGS[world["goal"]["kind"]].format(name=world["user"]["name"])
    prompt = (*prompt_head, {"role": "user", "content": opening})
    return Task(id=str(index), prompt=prompt, meta={"world": world})  # type: ignore[arg-type]


def support_source(test_size: int = 100, prompt_head: tuple[dict[str, Any], ...] = ()) -> ProceduralSource:
    """Unlimited tasks (24 × 22 names × 6 goals × worlds); the test split the first `test_size` in test."""
    return ProceduralSource("support", lambda i: make_task(i, prompt_head), test_size=test_size)
