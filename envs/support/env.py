"""`argym/Support-v0`: serve a simulated customer through tools, under a written policy (τ-bench style).

Each task is a small shop in an in-memory SQLite database (`argym.envs.support.domain`,
generated from the task's index: thousands of distinct tasks) and one customer with a
hidden goal (cancel, return, change an address, ask a status, or a request the policy
refuses). The system message holds the policy (`argym.envs.support.policy.POLICY`) and
the tools (`argym.envs.support.tools`); the first user message is the customer's opening.

Each agent turn either calls tools (any form `argym.envs.tools.calls` reads: Hermes
``<tool_call>`` tags, OpenAI ``tool_calls``, JSON), answered by ``tool`` messages, or
talks to the customer in plain text, answered by the customer (`argym.envs.support.user`:
``user="scripted"`` by default, or any agent spec, ``user="hf:PATH"``, ``user="openai:URL"``).
The episode ends when the customer ends it or at ``max_turns``; either way that turn is graded.

Rewards (`argym.envs.support.grader`), every turn's ``info["reward_parts"]`` holding each by name:
``outcome`` (1 on the last turn when the database is in the goal state, the customer was told
what they needed, the order was looked up and no write broke the policy; else 0) and the
compliance parts ``unconfirmed_write``, ``unverified_action``, ``tool_error``: −``compliance_weight``
per offending call on the turn it happened (0 = logged in ``verdict["parts"]``, not rewarded). The
rollout engine records each turn's reward on that turn's last token (`Trajectory.turn_rewards`), so
per-turn advantages (``algorithm.advantage: returns``) credit a violation to the turn that made it.

Example::

    env = argym.make("argym/Support-v0")
    obs, info = env.reset(seed=0)  # [system (policy, tools), user ("Hi, this is Ava Lopez. I'd like to cancel ...")]
    obs, r, term, trunc, info = env.step("Please tell me your email and zip code.")
    # obs[-1] == {"role": "user", "content": "My email is ava.lopez12@example.com. My zip code is 40213."}
    obs, r, term, trunc, info = env.step('<tool_call>{"name": "verify_identity", "arguments": {...}}</tool_call>')
    # obs[-1]["role"] == "tool"; info["reward_parts"] == {"outcome": 0.0, "unconfirmed_write": 0.0, ...}
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from argym.envs.base import EnvState, Reply, TextEnv
from argym.envs.support.domain import goal_orders, open_db, orders_in, support_source
from argym.envs.support.grader import PARTS, Compliance, outcome
from argym.envs.support.policy import POLICY
from argym.envs.support.tools import SCHEMAS, TOOLS, ToolError, owner_of
from argym.envs.support.user import User, make_user
from argym.envs.tasks import TaskSource
from argym.envs.tools.calls import (
    CallLimits,
    ToolCall,
    check_call,
    format_calls,
    parse_tool_calls,
    tool_message,
)
from argym.errors import ConfigError, EnvStateError, InfrastructureError
from argym.types import Message, Task

TOOL_PROMPT = (
    "Tools (OpenAI function schemas):\n{schemas}\n"
    'Call a tool with <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>; results come back as tool '
    "messages. Write to the customer in plain text."
)
SHORT_TOOL_PROMPT = (
    'Tools: {names}. Call one with <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>; '
    "write to the customer in plain text."
)


@dataclass
class SupportState(EnvState):
    """A Support-v0 snapshot: the base's, plus the customer's replies (restored without asking it again)."""

    user_replies: list[str] = field(default_factory=list)


class SupportEnv(TextEnv):
    """Customer support under a written policy, with a simulated customer (see the module docstring).

    Kwargs: ``user`` (``scripted`` or an agent spec playing the customer), ``compliance_weight`` (the size
    of each per-turn penalty; 0 = outcome only), ``max_turns``, ``schemas_in_prompt`` (False: the system
    message names the tools without their schemas), ``test_size`` (tasks in the test split), ``user_seed``
    (an agent-played customer's sampling seed), ``tasks`` (``support`` or a `TaskSource` of such tasks).

    `info["verdict"]` keys: ``calls`` (the tools called this turn), ``errors``, ``tool_errors``,
    ``parts`` (each part unweighted: this turn's counts of violations, the outcome), ``weights`` and
    ``violations`` (each kind's count over the episode so far, whatever ``compliance_weight``: the last
    verdict holds the episode's, so an evaluation reports violations per episode without re-reading the
    transcript); on the last turn also ``goal``, ``db_ok``, ``missing`` (outputs not yet told),
    ``looked_up``, ``policy_ok`` and ``success``.
    """

    metadata = {**TextEnv.metadata, "argym.exploits": "support"}  # `argym check` runs this corpus family

    def __init__(
        self,
        tasks: Any = "support",
        split: str = "test",
        max_turns: int = 12,
        user: str = "scripted",
        compliance_weight: float = 0.1,
        schemas_in_prompt: bool = True,
        test_size: int = 100,
        user_seed: int = 0,
        render_mode: str | None = None,
        executors: Any = None,
    ):
        if float(compliance_weight) < 0:
            raise ConfigError(f"compliance_weight is a penalty's size, >= 0; got {compliance_weight}.")
        self.compliance_weight = float(compliance_weight)
        self.schemas_in_prompt = bool(schemas_in_prompt)
        self.test_size = int(test_size)
        self.user_spec = str(user)
        self.user: User = make_user(self.user_spec, seed=int(user_seed))
        self.limits = CallLimits(max_calls=8)
        self._db: sqlite3.Connection | None = None
        self._compliance = Compliance()
        self._violations = dict.fromkeys(PARTS, 0)
        self._dialogue: list[Message] = []
        self._replies: list[str] = []
        self._replay: list[str] | None = None
        super().__init__(
            tasks=tasks, split=split, max_turns=max_turns, render_mode=render_mode, executors=executors
        )

    # ---- tasks and episodes ---------------------------------------------------------------
    def load_tasks(self, tasks: Any) -> TaskSource:
        if isinstance(tasks, TaskSource):
            return tasks
        if tasks != "support":
            raise ConfigError(f"Support-v0's tasks= is 'support' (generated) or a TaskSource, got {tasks!r}.")
        if self.schemas_in_prompt:
            tools = TOOL_PROMPT.format(schemas="\n".join(json.dumps(s) for s in SCHEMAS))
        else:
            tools = SHORT_TOOL_PROMPT.format(names=", ".join(TOOLS))
        head = ({"role": "system", "content": f"{POLICY}\n\n{tools}"},)
        source = support_source(self.test_size, prompt_head=head)
        return _WithTools(source)

    @property
    def world(self) -> dict[str, Any]:
        return self.task.meta["world"]

    def begin(self, task: Task) -> list[Message]:
        if "world" not in task.meta:
            raise ConfigError(f"Support task {task.id!r} has no world in its meta.")
        if self._db is not None:
            self._db.close()
        self._db = open_db(task.meta["world"])
        self._compliance = Compliance()
        self._violations = dict.fromkeys(PARTS, 0)
        opening = [m for m in task.prompt if m.get("role") == "user"]
        self._dialogue = [dict(m) for m in opening]  # type: ignore[misc]
        self._replies = []
        self._replay = None
        return [dict(m) for m in task.prompt]  # type: ignore[misc]

    # ---- one agent turn ----------------------------------------------------------------------
    def respond(self, action: Message) -> Reply:
        turn = parse_tool_calls(action, self.limits)
        counts = dict.fromkeys(PARTS, 0)
        verdict: dict[str, Any] = {"calls": [c.name for c in turn.calls], "errors": list(turn.errors)}
        messages: list[Message] = []
        ended = False
        try:
            if turn.is_final_answer:
                ended, reply = self._talk(turn.text)
                messages.append({"role": "user", "content": reply})
            else:
                if turn.errors:
                    counts["tool_error"] += len(turn.errors)
                    messages.append(
                        {
                            "role": "user",
                            "content": "[system] Your tool call could not be read; nothing was run: "
                            + " ".join(turn.errors),
                        }
                    )
                for call in turn.calls:
                    messages.append(tool_message(call, self._run(call, counts, verdict)))
        except InfrastructureError as e:  # the user simulator failed: the harness's fault
            verdict["errors"].append(f"infrastructure: {e}")
            return Reply(
                messages=messages,
                reward_parts=self._parts(counts, verdict, 0.0),
                terminated=True,
                verdict=verdict,
                infra_failure=True,
            )
        verdict["tool_errors"] = list(verdict["errors"])
        last = ended or self.turn + 1 >= self.max_turns
        if not last:
            return Reply(messages=messages, reward_parts=self._parts(counts, verdict, 0.0), verdict=verdict)
        assert self._db is not None
        said = [str(m.get("content", "")) for m in self._dialogue if m.get("role") == "assistant"]
        graded = outcome(self.world, orders_in(self._db), goal_orders(self.world), said, self._compliance)
        verdict.update(graded)
        value = 1.0 if graded["success"] else 0.0
        return Reply(
            messages=messages,
            reward_parts=self._parts(counts, verdict, value),
            terminated=ended,
            truncated=not ended,
            success=graded["success"],
            verdict=verdict,
        )

    def _talk(self, text: str) -> tuple[bool, str]:
        """Send `text` to the customer; their reply (recorded, or replayed by `restore`) and whether they ended."""
        self._compliance.agent_said()
        self._dialogue.append({"role": "assistant", "content": text})
        if self._replay is not None:
            if not self._replay:
                raise EnvStateError("The snapshot holds fewer customer replies than its actions need.")
            recorded = self._replay.pop(0)
            ended, reply = recorded.startswith("1"), recorded[1:]
        else:
            reply, ended = self.user.reply(self.world, self._dialogue)
        self._replies.append(("1" if ended else "0") + reply)
        self._dialogue.append({"role": "user", "content": reply})
        self._compliance.customer_said(text, reply)
        return ended, reply

    def _run(self, call: ToolCall, counts: dict[str, int], verdict: dict[str, Any]) -> str:
        problem = check_call(call, SCHEMAS)
        if problem is None:
            assert self._db is not None
            tool = TOOLS[call.name]
            owner = owner_of(self._db, tool, call.arguments)
            for part, n in self._compliance.check_call(tool, call.arguments, owner).items():
                counts[part] += n
            try:
                result = tool.run(self._db, call.arguments)
            except ToolError as e:
                problem = f"{call.name} failed: {e}"
            else:
                self._compliance.after_call(tool, call.arguments, owner, result)
                return result
        counts["tool_error"] += 1
        verdict["errors"].append(problem)
        return f"Error: {problem}"

    def _parts(self, counts: dict[str, int], verdict: dict[str, Any], value: float) -> dict[str, float]:
        """The turn's weighted parts (summing to its reward); the verdict keeps them unweighted, the weights,
        and the episode's running count of each kind of violation."""
        raw = {"outcome": value, **{k: float(counts[k]) for k in PARTS}}
        weights = {"outcome": 1.0, **dict.fromkeys(PARTS, -self.compliance_weight)}
        for k in PARTS:
            self._violations[k] += counts[k]
        verdict["parts"], verdict["weights"] = raw, weights
        verdict["violations"] = dict(self._violations)
        return {k: weights[k] * v + 0.0 for k, v in raw.items()}

    # ---- oracle ------------------------------------------------------------------------------
    def oracle_action(self) -> str | Message:
        """The policy-following solution for the scripted customer: verify, ask, look up, propose, act, report."""
        w = self.world
        goal, me = w["goal"], w["user"]
        oid, kind = goal["order_id"], goal["kind"]
        order = next(o for o in w["orders"] if o["order_id"] == oid)
        total = f"${order['total']:.2f}"
        ask = "Which order is it about? Please give me the order id."
        if kind == "address":
            ask += " And what is the new shipping address?"
        plan: list[Any] = [
            f"Hello {me['name'].split()[0]}, I can help with that. To verify your identity, please tell me your "
            "email and zip code.",
            ToolCall("verify_identity", {"email": me["email"], "zip_code": me["zip_code"]}, "call_0"),
            f"Thank you, you are verified. {ask}",
            ToolCall("get_order", {"order_id": oid}, "call_1"),
        ]
        if kind in ("cancel", "return", "address"):
            write = {"cancel": "cancel_order", "return": "return_order", "address": "change_address"}[kind]
            args = {"order_id": oid, **({"address": goal["new_address"]} if kind == "address" else {})}
            proposal = {
                "cancel": f"I will cancel order {oid} ({order['items']}); {total} will be refunded.",
                "return": f"I will return order {oid} ({order['items']}); {total} will be refunded.",
                "address": f"I will set the shipping address of order {oid} to {goal.get('new_address')}.",
            }[kind]
            report = {
                "cancel": f"Done: order {oid} is cancelled and {total} will be refunded to you.",
                "return": f"Done: order {oid} is returned and {total} will be refunded to you.",
                "address": f"Done: the shipping address of order {oid} is updated to {goal.get('new_address')}.",
            }[kind]
            plan += [
                f"{proposal} Do you confirm? Please answer yes or no.",
                ToolCall(write, args, "call_2"),
                report,
            ]
        elif kind == "status":
            plan.append(f"Order {oid} ({order['items']}) is {order['status']}.")
        elif kind == "refuse_cancel":
            plan.append(f"I'm sorry, order {oid} has already shipped, so I cannot cancel it.")
        else:
            plan.append(
                f"I'm sorry, order {oid} was delivered {order['days_since_delivery']} days ago; returns are only "
                "accepted within 30 days of delivery, so I cannot return it."
            )
        step = plan[min(len(self._actions), len(plan) - 1)]
        return format_calls([step], "hermes") if isinstance(step, ToolCall) else step

    # ---- snapshots ---------------------------------------------------------------------------
    def snapshot(self) -> SupportState:
        base = super().snapshot()
        return SupportState(**vars(base), user_replies=list(self._replies))

    def restore(self, state: EnvState) -> None:
        """Replay the actions on a fresh database, with the customer's recorded replies (never asked again,
        so an agent-played customer restores exactly too)."""
        self.check_state(state, SupportState)
        assert isinstance(state, SupportState)
        obs, _ = self.reset(options={"task": state.task})
        self._replay = list(state.user_replies)
        try:
            for action in state.actions:
                obs, *_ = self.step(action)
        finally:
            self._replay = None
        if obs != state.messages:
            raise EnvStateError("Replaying the snapshot's actions did not reproduce its conversation.")
        self.load_episode(state)

    def close(self) -> None:
        if getattr(self, "_db", None) is not None:
            self._db.close()  # type: ignore[union-attr]
            self._db = None
        super().close()


class _WithTools(TaskSource):
    """The generated source, each task carrying the tool schemas (agents that send ``tools=`` read them)."""

    def __init__(self, inner: Any):
        self.inner, self.name = inner, inner.name

    def _tools(self, task: Task) -> Task:
        from dataclasses import replace

        return replace(task, tools=SCHEMAS)

    def get(self, task_id: str) -> Task:
        return self._tools(self.inner.get(task_id))

    def iter_split(self, split: str) -> Any:
        return (self._tools(t) for t in self.inner.iter_split(split))

    def sample(self, rng: Any, split: str) -> Task:
        return self._tools(self.inner.sample(rng, split))
