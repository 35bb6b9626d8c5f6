"""The simulated customer: a hidden goal and persona, scripted or played by any agent spec.

`ScriptedUser` (the default) is deterministic and reads the agent's last message
for what it asks: it gives its email, zip code, order id or new address only
when asked for it, says "yes" only to a proposal that names its goal's action
and order (and "no" to anything else: it refuses what its goal excludes), and
ends the conversation once it believes its request is done (it was told what it
needed, after a confirmed change for a goal that changes something) or refused
for the policy's reason. `AgentUser` gives the same persona and goal to any
agent spec (``hf:PATH``, ``openai:URL``, ``tiny``...) in a system message, with
the roles flipped, and ends when it writes ``###STOP###`` (τ-bench's user
simulator, arXiv 2406.12045), so training can run on the scripted user and
evaluation against a strong simulator. `AgentUser` lives with the agents
(`argym.agents.customer`); `CUSTOMERS` names both.

Both see only the dialogue: the opening and the agent's plain-text messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from argym.envs.support.domain import WRITE_KINDS
from argym.envs.support.grader import missing_outputs
from argym.errors import ConfigError
from argym.registry import Registry
from argym.types import Message

STOP = "###STOP###"
_VERBS = {"cancel": "cancel", "return": "return", "address": "address"}
_WANTS = {
    "cancel": "cancel",
    "refuse_cancel": "cancel",
    "return": "return",
    "refuse_return": "return",
    "address": "address",
}
"""The change each goal asks for (a refused goal's customer still wants it, and says yes to it)."""
_ASKS_CONFIRM = (
    "confirm",
    "proceed",
    "go ahead",
    "shall i",
    "should i",
    "would you like me to",
    "do you want me to",
    "is that ok",
    "is that correct",
)
"""A question with one of these asks the customer to confirm a proposed action."""
_ASKS_ORDER = ("order id", "order number", "which order", "which of your orders", "id of the order")
_DONE = ("cancelled", "canceled", "returned", "updated", "changed", "done", "processed")


class User(Protocol):
    def reply(self, world: dict[str, Any], dialogue: list[Message]) -> tuple[str, bool]:
        """The customer's next message after `dialogue` (user = customer, assistant = agent), and whether
        the customer ends the conversation with it."""
        ...


def wish(world: dict[str, Any]) -> str:
    """The goal as the customer states it (without the details it keeps until asked)."""
    kind = world["goal"]["kind"]
    return {
        "cancel": "I want to cancel my order.",
        "refuse_cancel": "I want to cancel my order.",
        "address": "I want to change the shipping address of my order.",
        "return": "I want to return my order.",
        "refuse_return": "I want to return my order.",
        "status": "I want to know the status of my order.",
    }[kind]


class ScriptedUser:
    """The deterministic customer (see the module docstring); a pure function of the world and dialogue."""

    name = "scripted"

    def reply(self, world: dict[str, Any], dialogue: list[Message]) -> tuple[str, bool]:
        goal, me = world["goal"], world["user"]
        kind = goal["kind"]
        text = str(dialogue[-1].get("content", "")) if dialogue else ""
        low = text.lower()
        said = [str(m.get("content", "")) for m in dialogue if m.get("role") == "assistant"]
        if "?" in text and any(w in low for w in _ASKS_CONFIRM):
            if kind in _WANTS and self._matches(goal, low):
                return "Yes, please go ahead.", False
            return f"No, I don't want that. {wish(world)}", False
        answers = []
        if "email" in low or "e-mail" in low:
            answers.append(f"My email is {me['email']}.")
        if "zip" in low or "postal" in low:
            answers.append(f"My zip code is {me['zip_code']}.")
        if any(w in low for w in _ASKS_ORDER):
            answers.append(f"It's order {goal['order_id']}.")
        if kind == "address" and "address" in low and any(w in low for w in ("new", "which", "what")):
            answers.append(f"The new address is {goal['new_address']}.")
        if answers:
            return " ".join(answers), False
        if self._satisfied(world, dialogue, said, low):
            return "Thank you, that's all I needed.", True
        return f"Sorry, that doesn't answer my question. {wish(world)}", False

    @staticmethod
    def _matches(goal: dict[str, Any], low: str) -> bool:
        """Whether a proposal names the goal's action and order (and no other change)."""
        verb = _WANTS[goal["kind"]]
        others = [v for v in _VERBS.values() if v != verb]
        ok = verb in low and goal["order_id"].lower() in low and not any(v in low for v in others)
        if goal["kind"] == "address":
            ok = ok and goal["new_address"].lower() in low
        return ok

    @staticmethod
    def _satisfied(world: dict[str, Any], dialogue: list[Message], said: list[str], low: str) -> bool:
        goal = world["goal"]
        if missing_outputs(said, goal["must_tell"], goal["kind"]):
            return False
        if goal["kind"] not in WRITE_KINDS:
            return True
        confirmed = any(
            m.get("role") == "user" and str(m.get("content", "")).startswith("Yes") for m in dialogue
        )
        return confirmed and any(w in low for w in _DONE)


def persona_prompt(world: dict[str, Any]) -> str:
    """The system message an agent-played customer gets: persona, hidden goal, details, rules."""
    goal, me = world["goal"], world["user"]
    oid = goal["order_id"]
    wants = {
        "cancel": f"cancel order {oid}",
        "refuse_cancel": f"cancel order {oid} (if the agent explains why it cannot be done, accept that)",
        "address": f"change the shipping address of order {oid} to {goal.get('new_address')}",
        "return": f"return order {oid} and get a refund",
        "refuse_return": f"return order {oid} (if the agent explains why it cannot be done, accept that)",
        "status": f"learn the status of order {oid}",
    }[goal["kind"]]
    return (
        f"You are {me['name']}, a customer ({me['persona']}) talking to a shop's support agent. Your goal: "
        f"{wants}. Your details, each given only when the agent asks for it: email {me['email']}, zip code "
        f"{me['zip_code']}, order id {oid}"
        + (f", new address {goal['new_address']}" if goal["kind"] == "address" else "")
        + ". Answer 'yes' only to a proposed action that matches your goal; refuse anything else. "
        f"Write one short message at a time. When your request is done, or the agent has explained why it "
        f"cannot be done, end your message with {STOP}."
    )


CUSTOMERS: Registry[Callable[[str, int], User]] = Registry(
    "customer simulator", {"agent": "argym.agents.customer"}
)
"""Support-v0's ``user=``: a name → ``(spec, seed) -> User``. ``scripted`` is here; ``agent`` (any other spec,
played by that agent) lives with the agents (`argym.agents.customer`), loaded on first use."""
CUSTOMERS.add("scripted", lambda spec, seed: ScriptedUser())


def make_user(spec: str, seed: int = 0) -> User:
    """``scripted`` (the default), another registered name, or an agent spec (``hf:PATH``, ``openai:URL``, ...)."""
    if not spec or spec in ("oracle", "random", "agent"):
        raise ConfigError(
            f"user={spec!r}: the customer is 'scripted' or an agent spec that writes text "
            "(hf:PATH, openai:URL?model=NAME, tiny, ...)."
        )
    return CUSTOMERS.get(spec if spec in CUSTOMERS else "agent")(spec, seed)
