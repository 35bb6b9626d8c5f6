"""Support-v0's grading: the per-turn policy checks and the episode's outcome.

Per turn (`Compliance.check_call`, one count per offending call, each logged under its
name in ``info["reward_parts"]`` on the turn it happened):

- ``unverified_action``: an account tool (list, look up, change an order) on an account
  other than the one verify_identity verified (or before any was verified);
- ``unconfirmed_write``: a write without the customer's "yes" to a proposal that named
  this order, given after the agent's last message (one yes covers one write);
- ``tool_error``: a call that could not be read or that the tool refused.

The outcome (τ-bench's, arXiv 2406.12045: the database ends in the goal state and the user
was told what they needed) is 1 when the orders table equals the goal's, every required
output was said to the user, the target order was looked up while its owner was verified
(what the agent tells must come from the tools), and no write broke the policy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PARTS = ("unconfirmed_write", "unverified_action", "tool_error")
"""The per-turn compliance parts, in the order logged."""
STATUSES = ("pending", "shipped", "delivered", "cancelled", "returned")
_YES = re.compile(r"^\W*(yes|yeah|yep|sure|i confirm|confirmed?|go ahead|please do|ok(ay)?\b)", re.IGNORECASE)


def is_yes(text: str) -> bool:
    """Whether the customer's message is an explicit confirmation ("yes", "I confirm", "go ahead")."""
    return bool(_YES.match(text or ""))


def missing_outputs(texts: list[str], must_tell: list[str], kind: str) -> list[str]:
    """The required outputs no agent message said (case-insensitive). A status must be said in a message
    that names no other status, so listing every status does not count as telling the right one."""
    out = []
    for item in must_tell:
        want = item.lower()
        ok = False
        for text in texts:
            low = text.lower()
            if want not in low:
                continue
            if want in STATUSES and kind == "status" and any(s in low for s in STATUSES if s != want):
                continue
            ok = True
            break
        if not ok:
            out.append(item)
    return out


@dataclass
class Compliance:
    """What the policy checks need to remember within an episode (reset with the episode)."""

    verified: str | None = None
    """The customer_id verify_identity last verified."""
    proposal: str | None = None
    """The agent message the customer said yes to, while that yes is unused."""
    looked_up: set[str] = field(default_factory=set)
    """Order ids whose details the agent read while their owner was verified."""
    bad_writes: int = 0
    """Writes that broke the policy (unverified or unconfirmed)."""

    def agent_said(self) -> None:
        """A new message to the customer: any earlier yes answered an earlier question."""
        self.proposal = None

    def customer_said(self, agent_text: str, reply: str) -> None:
        self.proposal = agent_text if is_yes(reply) else None

    def check_call(self, tool: Any, args: dict[str, Any], owner: str | None) -> dict[str, int]:
        """The violations of one readable call to an existing tool, before it runs (`owner`: whose account)."""
        found = dict.fromkeys(PARTS, 0)
        if tool.account is not None and owner is not None and owner != self.verified:
            found["unverified_action"] = 1
        if tool.writes:
            order_id = str(args.get("order_id", "")).strip()
            if self.proposal is None or not order_id or order_id not in self.proposal:
                found["unconfirmed_write"] = 1
            self.proposal = None  # one yes, one write
            if found["unverified_action"] or found["unconfirmed_write"]:
                self.bad_writes += 1
        return found

    def after_call(self, tool: Any, args: dict[str, Any], owner: str | None, result: str) -> None:
        """Remember what a successful call established (a verified customer, an order looked up)."""
        if tool.name == "verify_identity":
            import json

            self.verified = json.loads(result)["customer_id"]
        elif owner is not None and owner == self.verified:
            if tool.name == "get_order":
                self.looked_up.add(str(args["order_id"]).strip())
            elif tool.name == "list_orders":
                self.looked_up.add(f"customer:{owner}")


def outcome(
    world: dict[str, Any],
    orders_now: list[dict[str, Any]],
    goal_rows: list[dict[str, Any]],
    texts: list[str],
    compliance: Compliance,
) -> dict[str, Any]:
    """The episode's verdict: ``db_ok``, ``missing`` outputs, ``looked_up``, ``policy_ok`` and ``success``."""
    goal = world["goal"]
    target = goal["order_id"]
    owner = next(o["customer_id"] for o in world["orders"] if o["order_id"] == target)
    db_ok = orders_now == goal_rows
    missing = missing_outputs(texts, goal["must_tell"], goal["kind"])
    looked = target in compliance.looked_up or f"customer:{owner}" in compliance.looked_up
    policy_ok = compliance.bad_writes == 0
    return {
        "goal": goal["kind"],
        "db_ok": db_ok,
        "missing": missing,
        "looked_up": looked,
        "policy_ok": policy_ok,
        "success": db_ok and not missing and looked and policy_ok,
    }
