"""Support-v0's tools: read and change the episode's SQLite database.

Each tool is a JSON-schema'd function over the database (`TOOLS`); a tool
enforces the data's integrity (an unknown order, cancelling a delivered order,
returning an order that was never delivered are errors) but not the policy: the
30-day return window, asking for confirmation and verifying the customer are the
agent's job, checked by the grader. Account tools name the order or customer they
touch (`Tool.account`), so the grader can tell whether the customer was verified.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from argym.envs.support.domain import money


class ToolError(Exception):
    """The call could not be done; the message is the agent's observation."""


@dataclass(frozen=True)
class Tool:
    """One tool: its schema, whether it writes, and what it does (`run(db, args) -> text`)."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[sqlite3.Connection, dict[str, Any]], str]
    writes: bool = False
    account: str | None = None
    """The argument naming the account it touches (``order_id`` or ``customer_id``); None: no account."""

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def _params(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": d} for k, d in props.items()},
        "required": list(props),
        "additionalProperties": False,
    }


def _order(db: sqlite3.Connection, order_id: str) -> sqlite3.Row:
    row = db.execute("SELECT * FROM orders WHERE order_id = ?", (order_id.strip(),)).fetchone()
    if row is None:
        raise ToolError(f"No order {order_id!r}. Order ids look like #W1234567.")
    return row


def owner_of(db: sqlite3.Connection, tool: Tool, args: dict[str, Any]) -> str | None:
    """The customer whose account the call touches (None if it names no existing account)."""
    if tool.account == "customer_id":
        return str(args.get("customer_id", "")).strip()
    if tool.account == "order_id":
        row = db.execute(
            "SELECT customer_id FROM orders WHERE order_id = ?", (str(args.get("order_id", "")).strip(),)
        ).fetchone()
        return row[0] if row else None
    return None


def verify_identity(db: sqlite3.Connection, args: dict[str, Any]) -> str:
    row = db.execute(
        "SELECT customer_id, name FROM customers WHERE lower(email) = lower(?) AND zip_code = ?",
        (args["email"].strip(), args["zip_code"].strip()),
    ).fetchone()
    if row is None:
        raise ToolError("No customer with that email and zip code.")
    return json.dumps({"verified": True, "customer_id": row["customer_id"], "name": row["name"]})


def list_orders(db: sqlite3.Connection, args: dict[str, Any]) -> str:
    rows = db.execute(
        "SELECT order_id, status FROM orders WHERE customer_id = ? ORDER BY rowid",
        (args["customer_id"].strip(),),
    ).fetchall()
    if not rows:
        raise ToolError(f"No customer {args['customer_id']!r} (or no orders).")
    return json.dumps([dict(r) for r in rows])


def get_order(db: sqlite3.Connection, args: dict[str, Any]) -> str:
    row = dict(_order(db, args["order_id"]))
    row["total"] = money(row["total"])
    return json.dumps(row)


def _refund(db: sqlite3.Connection, args: dict[str, Any], needs: str, becomes: str, verb: str) -> str:
    """Move an order from status `needs` to `becomes` (a cancel or a return) and report the refund."""
    row = _order(db, args["order_id"])
    if row["status"] != needs:
        raise ToolError(f"Order {row['order_id']} is {row['status']}; only {needs} orders can be {verb}.")
    db.execute("UPDATE orders SET status = ? WHERE order_id = ?", (becomes, row["order_id"]))
    return json.dumps({"order_id": row["order_id"], "status": becomes, "refund": money(row["total"])})


def cancel_order(db: sqlite3.Connection, args: dict[str, Any]) -> str:
    return _refund(db, args, "pending", "cancelled", "cancelled")


def return_order(db: sqlite3.Connection, args: dict[str, Any]) -> str:
    return _refund(db, args, "delivered", "returned", "returned")


def change_address(db: sqlite3.Connection, args: dict[str, Any]) -> str:
    row = _order(db, args["order_id"])
    if row["status"] != "pending":
        raise ToolError(f"Order {row['order_id']} is {row['status']}; only pending orders can be changed.")
    address = args["address"].strip()
    if not address:
        raise ToolError("The new address is empty.")
    db.execute("UPDATE orders SET address = ? WHERE order_id = ?", (address, row["order_id"]))
    return json.dumps({"order_id": row["order_id"], "address": address})


_ORDER_ID = "the order id, e.g. #W1234567"
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "verify_identity",
            "Find and verify the customer by email and zip code; returns their customer_id.",
            _params(email="the customer's email", zip_code="the customer's zip code"),
            verify_identity,
        ),
        Tool(
            "list_orders",
            "List a customer's order ids and statuses.",
            _params(customer_id="the customer_id verify_identity returned"),
            list_orders,
            account="customer_id",
        ),
        Tool("get_order", "An order's details.", _params(order_id=_ORDER_ID), get_order, account="order_id"),
        Tool(
            "cancel_order",
            "Cancel a pending order (refunds its total).",
            _params(order_id=_ORDER_ID),
            cancel_order,
            writes=True,
            account="order_id",
        ),
        Tool(
            "return_order",
            "Return a delivered order (refunds its total).",
            _params(order_id=_ORDER_ID),
            return_order,
            writes=True,
            account="order_id",
        ),
        Tool(
            "change_address",
            "Change a pending order's shipping address.",
            _params(order_id=_ORDER_ID, address="the new address"),
            change_address,
            writes=True,
            account="order_id",
        ),
    )
}
SCHEMAS: tuple[dict[str, Any], ...] = tuple(t.schema() for t in TOOLS.values())
