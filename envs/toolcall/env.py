"""`argym/ToolCall-v0`: call tools, read their results, answer.

The system message lists the task's tools as OpenAI function schemas and says
how to call them. Each turn the agent either calls tools, in any form
`argym.envs.tools.calls` reads (OpenAI ``tool_calls`` on a message dict,
OpenAI-style JSON as the text, Hermes/Qwen ``<tool_call>`` tags), or answers
in plain text. Two task sources (``tasks=``):

- ``executable(test_size=200[, kinds=a+b])`` (default): multi-step tasks with
  real tools (`argym.envs.toolcall.tools`); each call runs and its result comes
  back as a ``tool`` message; a turn without calls is the final answer, graded
  against the task's answer (`argym.envs.toolcall.grading`: numbers by value, the last number in the text;
  weekdays by name; where the task asks to save a value, the key-value store
  must hold it). Reward 1 for a correct answer; ``info["reward_parts"]``
  also has ``format`` (``format_weight`` × the turn's calls were all valid)
  and ``calls`` (``call_weight`` × the number of calls), 0 by default; the
  verdict holds each part unweighted (``verdict["parts"]``) and its weight
  (``verdict["weights"]``). ``grounded=True``: a right answer counts only if a
  tool's result in the episode held it (``verdict["grounded"]``), so a guess,
  however lucky, scores 0 (a weekday task's answer is one of seven names).
- ``bfcl``, ``bfcl/CATEGORY`` or ``bfcl(categories=a+b, per_category=N)``:
  BFCL's single-turn categories (`argym.envs.toolcall.bfcl`); one turn, graded
  by argym's AST checker against BFCL's possible answers (irrelevance: no call).

``tools="mcp:COMMAND ARG ..."`` (a stdio MCP server argym starts) or
``tools="mcp+http://HOST:PORT/PATH"`` (a streamable-HTTP one) replaces the tools
with an MCP server's (`argym.envs.tools.mcp`): its tools are every task's
schemas and calls go to it through the `mcp` SDK, each under ``timeout_s``.
Tasks then come from a JSONL file (or a list of `Task`): one object a line with
``prompt`` (text or messages), ``answer``, optionally ``id``, ``split``,
``answer_type`` (``number``, the default; ``weekday``; ``text``: the answer
must contain it, case-insensitively) and ``plan`` (the oracle's calls, a list
of turns, each a list of ``{"name", "arguments"}``). A tool's own error is the
agent's observation; a server that cannot start or crashes is an
infrastructure failure; the env stops a stdio server on `close()`.

Bad calls (malformed JSON, trailing text, unknown tools, missing or mistyped
arguments, 10,000 calls, deep nesting, huge strings, a tool that raises or
runs past ``timeout_s``) are answered with an error that says what was wrong,
and the episode goes on until ``max_turns`` (then reward 0). Only a sandbox
that cannot start or run is an infrastructure failure (the episode ends, marked).

Example::

    env = argym.make("argym/ToolCall-v0")
    obs, info = env.reset(seed=0)   # [system (tools), user (question)]
    obs, r, term, trunc, info = env.step('<tool_call>{"name": "search_docs", "arguments": {"query": "Deleskford"}}</tool_call>')
    # obs[-1] == {"role": "tool", "tool_call_id": "call_0", "name": "search_docs", "content": "[doc-00] Deleskford: ..."}
    obs, r, term, trunc, info = env.step("The population is 27503.")
    # r == 1.0 if that answers the question; info["verdict"] == {"answer": "27503", "expected": "27503", ...}
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from argym.envs.base import Reply, TextEnv
from argym.envs.executors import DeadlineExceeded, WorkerPool
from argym.envs.sandbox.base import Sandbox, SandboxName, SandboxUnavailable
from argym.envs.task_specs import SourceFactory, resolve_source
from argym.envs.tasks import ListSource, TaskSource
from argym.envs.toolcall import bfcl
from argym.envs.toolcall.executable import executable_source
from argym.envs.toolcall.grading import grade_answer, grade_bfcl
from argym.envs.toolcall.tools import TOOLS, ToolContext, ToolError
from argym.envs.tools.calls import (
    CallLimits,
    ParsedTurn,
    ToolCall,
    check_call,
    format_calls,
    parse_tool_calls,
    tool_message,
)
from argym.envs.tools.mcp import MCPTools, is_mcp_spec
from argym.errors import ConfigError, InfrastructureError
from argym.registry import Registry
from argym.types import Message, Task

PROMPT = (
    "You can call these tools (OpenAI function schemas):\n{schemas}\n\n"
    'To call tools, reply with one <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call> block per '
    "call (or the JSON object, or a list of them, alone). Results come back as tool messages. {finish}"
)
SHORT_PROMPT = (
    'Tools: {names}. Call one with <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>. {finish}'
)
FINISH_EXECUTABLE = "When you know the answer, reply with it in plain text and no tool call."
FINISH_BFCL = "Reply with the call(s) that answer the request; if no tool fits it, reply in plain text."


TOOLCALL_SOURCES: Registry[SourceFactory] = Registry("ToolCall task source")
"""The named specs of ``tasks=``: source name → factory; `@TOOLCALL_SOURCES.register("mine")` adds one."""
TOOLCALL_SOURCES.add("executable", executable_source)


@TOOLCALL_SOURCES.register("bfcl")
def bfcl_tasks(categories: str | list[str] | None = None, per_category: int | None = None) -> TaskSource:
    """BFCL's single-turn categories: ``bfcl`` (all), ``bfcl/CATEGORY`` or ``bfcl(categories=a+b, per_category=N)``."""
    return bfcl.bfcl_source(
        categories.split("+") if isinstance(categories, str) else categories, per_category
    )


def toolcall_tasks(tasks: Any, tools: list[dict[str, Any]] | None = None) -> TaskSource:
    """The `tasks=` kwarg: ``executable(...)``, ``bfcl``, ``bfcl/CATEGORY``, ``bfcl(categories=..., per_category=N)``;
    with an MCP server's `tools`, a JSONL file or a list of `Task` (each task gets those tools)."""
    if tools is not None:
        return _mcp_tasks(tasks, tools)

    def row(row: dict[str, Any], default_id: str) -> Task:
        raise ConfigError(
            "ToolCall tasks come from `executable` or `bfcl`; JSONL task files are not supported."
        )

    return resolve_source(tasks, row_to_task=row, named=TOOLCALL_SOURCES, kind="ToolCall")


ANSWER_TYPES = ("number", "weekday", "text")


def _mcp_tasks(tasks: Any, tools: list[dict[str, Any]]) -> TaskSource:
    """Tasks for an MCP server's tools: JSONL rows or a list of `Task`, every task offered all of `tools`."""

    def row(row: dict[str, Any], default_id: str) -> Task:
        prompt = row["prompt"]
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
        if not isinstance(prompt, list) or not prompt or not all(isinstance(m, dict) for m in prompt):
            raise ValueError("'prompt' must be a string or a non-empty list of messages")
        answer_type = str(row.get("answer_type", "number"))
        if answer_type not in ANSWER_TYPES:
            raise ValueError(f"'answer_type' must be one of {ANSWER_TYPES}, got {answer_type!r}")
        meta = {"source": "mcp", "answer_type": answer_type}
        if "plan" in row:
            meta["plan"] = row["plan"]
        return Task(
            id=str(row.get("id", default_id)), prompt=tuple(prompt), answer=str(row["answer"]), meta=meta
        )

    def named(name: str, kwargs: dict[str, Any]) -> TaskSource:
        raise ConfigError(
            f"With an MCP tool server, tasks= is a JSONL file or a list of argym.Task "
            f"(its tools are the server's), not {name!r}."
        )

    source = resolve_source(tasks, row_to_task=row, named=named, kind="ToolCall (MCP)")
    if not isinstance(source, ListSource):
        raise ConfigError(
            f"With an MCP tool server, tasks= is a JSONL file or a list of argym.Task, "
            f"got {type(source).__name__}."
        )
    schemas = tuple(tools)
    return ListSource(
        [replace(t, tools=schemas, meta={"answer_type": "number", **t.meta}) for t in source.tasks],
        name=source.name,
    )


class ToolCallEnv(TextEnv):
    """Tool calling: BFCL's single-turn categories and executable multi-step tasks.

    ``schemas_in_prompt=False`` names the tools in the system message without
    their schemas: for agents whose chat template renders ``tools=`` itself
    (the rollout engine passes ``task.tools``), and for small contexts.

    `info["verdict"]` keys: ``calls`` (names called this turn), ``errors`` (what
    was wrong), ``format_ok``; on the final turn ``answer`` and ``expected``
    (executable) or ``check`` (BFCL's AST verdict) and ``category``.
    """

    metadata = {**TextEnv.metadata, "argym.exploits": "toolcall"}  # `argym check` runs this corpus family

    def __init__(
        self,
        tasks: Any = "executable",
        split: str = "test",
        max_turns: int = 8,
        timeout_s: float = 5.0,
        sandbox: SandboxName | Sandbox = "process",
        format_weight: float = 0.0,
        call_weight: float = 0.0,
        grounded: bool = False,
        oracle_style: str = "hermes",
        schemas_in_prompt: bool = True,
        tools: str | None = None,
        render_mode: str | None = None,
        executors: Any = None,
    ):
        if not timeout_s or float(timeout_s) <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s!r}.")
        if oracle_style not in ("hermes", "json", "openai"):
            raise ConfigError(f"oracle_style must be hermes, json or openai, got {oracle_style!r}.")
        self.timeout_s = float(timeout_s)
        self.format_weight = float(format_weight)
        self.call_weight = float(call_weight)
        self.grounded = bool(grounded)
        """Score a right answer only if a tool's result held it: under an outcome reward a one-turn guess of a
        weekday pays 1 in 7, about what a weak policy's tool chain pays, and GRPO then learns to guess
        (BENCHMARKS.md, "Real agents learn", seed 2)."""
        self.oracle_style = oracle_style
        self.schemas_in_prompt = bool(schemas_in_prompt)
        self.limits = CallLimits()
        self._sandbox_spec = sandbox
        self._ctx = ToolContext()
        self._calls_made = 0
        self._results: list[str] = []
        """The episode's successful tool results, which a grounded answer must come from."""
        if tools is not None and not is_mcp_spec(tools):
            raise ConfigError(
                f"tools= names an MCP server: 'mcp:COMMAND ARG ...' or 'mcp+http://HOST:PORT/PATH'; "
                f"got {tools!r}."
            )
        if tools is not None and tasks == "executable":
            raise ConfigError(
                "With an MCP tool server (tools=...), give tasks= a JSONL file or a list of "
                "argym.Task: the executable tasks need argym's own tools."
            )
        self.mcp: MCPTools | None = MCPTools(tools, timeout_s=self.timeout_s) if tools is not None else None
        try:
            super().__init__(
                tasks=tasks, split=split, max_turns=max_turns, render_mode=render_mode, executors=executors
            )
        except BaseException:
            self.close()
            raise

    def load_tasks(self, tasks: Any) -> TaskSource:
        return toolcall_tasks(tasks, self.mcp.schemas if self.mcp is not None else None)

    @property
    def sandbox(self) -> Sandbox:
        """The executors' sandbox (the engine's if it handed one in, else this env's own) of the named backend."""
        return self.executors.sandbox_for(self._sandbox_spec)

    def begin(self, task: Task) -> list[Message]:
        if not task.tools and task.meta.get("source") != "bfcl":  # a few BFCL irrelevance tasks offer no tool
            raise ConfigError(f"ToolCall task {task.id!r} has no tools.")
        self._ctx = ToolContext(
            store=dict(task.meta.get("store") or {}), sandbox=lambda: self.sandbox, timeout_s=self.timeout_s
        )
        self._calls_made = 0
        self._results = []
        finish = FINISH_BFCL if task.meta.get("source") == "bfcl" else FINISH_EXECUTABLE
        if self.schemas_in_prompt:
            system = PROMPT.format(
                schemas="\n".join(json.dumps(t) for t in task.tools or ()) or "(none)", finish=finish
            )
        else:  # the agent's chat template renders `task.tools` itself (or the context is small)
            names = ", ".join((t.get("function") or t).get("name", "?") for t in task.tools or ()) or "none"
            system = SHORT_PROMPT.format(names=names, finish=finish)
        messages = [dict(m) for m in task.prompt]
        if messages and messages[0].get("role") == "system":  # BFCL live tasks bring their own system message
            messages[0]["content"] = system + "\n\n" + str(messages[0].get("content", ""))
            return messages  # type: ignore[return-value]
        return [{"role": "system", "content": system}, *messages]  # type: ignore[list-item]

    def respond(self, action: Message) -> Reply:
        turn = parse_tool_calls(action, self.limits)
        if self.task.meta.get("source") == "bfcl":
            return self._grade_bfcl(turn)
        verdict: dict[str, Any] = {
            "calls": [c.name for c in turn.calls],
            "errors": list(turn.errors),
            "format_ok": turn.ok,
        }
        if turn.is_final_answer:
            return self._final(turn.text, verdict)
        messages: list[Message] = []
        if turn.errors:
            messages.append(
                {
                    "role": "user",
                    "content": "Your tool call could not be read; nothing was run for it: "
                    + " ".join(turn.errors),
                }
            )
        try:
            for call in turn.calls:
                failed = len(verdict["errors"])
                result = self._run(call, verdict)
                if len(verdict["errors"]) == failed:
                    self._results.append(result)
                messages.append(tool_message(call, result))
        except (
            InfrastructureError,
            SandboxUnavailable,
        ) as e:  # a sandbox or tool worker could not run: a harness fault
            verdict["errors"].append(f"infrastructure: {e}")
            return Reply(
                messages=messages,
                reward_parts={"outcome": 0.0},
                terminated=True,
                verdict=verdict,
                infra_failure=True,
            )
        verdict["format_ok"] = not verdict["errors"]
        self._calls_made += len(turn.calls)
        return Reply(messages=messages, reward_parts=self._shaping(verdict), verdict=verdict)

    def _run(self, call: ToolCall, verdict: dict[str, Any]) -> str:
        problem = check_call(call, self.task.tools or ())
        if problem is None and self.mcp is not None:
            try:
                ok, text = self.mcp.call(call.name, call.arguments)
            except DeadlineExceeded:
                problem = f"{call.name} did not finish within {self.timeout_s:g} s and was stopped."
            else:
                if ok:
                    return text
                problem = f"{call.name} failed: {text}"
        elif problem is None and call.name not in TOOLS:
            problem = f"The tool '{call.name}' cannot run in this env."
        if problem is None:
            tool = TOOLS[call.name]
            try:
                if not tool.stateless:
                    return tool.run(call.arguments, self._ctx)
                ok, text = self._tool_pool().call(call.name, call.arguments, deadline_s=self.timeout_s)
                if ok:
                    return text
                problem = f"{call.name} failed: {text}"
            except DeadlineExceeded:
                problem = f"{call.name} did not finish within {self.timeout_s:g} s and was stopped."
            except ToolError as e:
                problem = f"{call.name} failed: {e}"
            except (InfrastructureError, SandboxUnavailable):
                raise
            except Exception as e:  # a tool's own bug on odd arguments is still the agent's failure to avoid
                problem = f"{call.name} failed: {type(e).__name__}: {e}"
        verdict["errors"].append(problem)
        return f"Error: {problem}"

    def _tool_pool(self) -> WorkerPool:
        """The executors' tool workers: the engine's if it handed them in, else this env's own."""
        return self.executors.tools

    def _shaping(self, verdict: dict[str, Any], outcome: float | None = None) -> dict[str, float]:
        """The turn's weighted reward parts (they sum to its reward). The verdict keeps each part unweighted
        (``parts``) and its weight (``weights``), so a reader sees "format 1 x 0", not a bare "format 0"."""
        raw = {"format": float(verdict["format_ok"]), "calls": float(len(verdict["calls"]))}
        weights = {"format": self.format_weight, "calls": self.call_weight}
        if outcome is not None:
            raw, weights = {"outcome": outcome, **raw}, {"outcome": 1.0, **weights}
        verdict["parts"], verdict["weights"] = raw, weights
        return {k: weights[k] * v for k, v in raw.items()}

    def _final(self, text: str, verdict: dict[str, Any]) -> Reply:
        success = grade_answer(
            text,
            self.task,
            verdict,
            results=self._results if self.grounded else None,
            store=self._ctx.store,
            calls_made=self._calls_made,
        )
        parts = self._shaping(verdict, outcome=1.0 if success else 0.0)
        return Reply(reward_parts=parts, terminated=True, success=success, verdict=verdict)

    def _grade_bfcl(self, turn: ParsedTurn) -> Reply:
        verdict, ok = grade_bfcl(turn, self.task)
        parts = self._shaping(verdict, outcome=1.0 if ok else 0.0)
        return Reply(reward_parts=parts, terminated=True, success=ok, verdict=verdict)

    def oracle_action(self) -> str | Message:
        task = self.task
        if task.meta.get("source") == "bfcl":
            calls = bfcl.oracle_calls(task)
            if not calls:
                return "None of the available tools can do this."
            return format_calls(
                [ToolCall(n, a, f"call_{i}") for i, (n, a) in enumerate(calls)], self.oracle_style
            )
        if "plan" not in task.meta:
            raise NotImplementedError(f"Task {task.id!r} has no plan, so ToolCall-v0 has no oracle for it.")
        plan = task.meta["plan"]
        done = sum(1 for m in self._messages if m.get("role") == "assistant")
        if done < len(plan):
            planned = [
                ToolCall(c["name"], c["arguments"], f"call_{done}_{i}") for i, c in enumerate(plan[done])
            ]
            return format_calls(planned, self.oracle_style)
        return f"The answer is {task.answer}."

    def grader_versions(self) -> dict[str, str]:
        """BFCL's data version and a hash of argym's checker (BFCL); a hash of the tools (executable tasks)."""
        import hashlib
        from pathlib import Path

        here = Path(__file__).parent
        if self.mcp is not None:
            return {
                "mcp-tools": hashlib.sha256(
                    json.dumps(self.mcp.schemas, sort_keys=True).encode()
                ).hexdigest()[:12]
            }
        if getattr(self.tasks, "name", "").startswith("bfcl"):
            checker = hashlib.sha256((here / "bfcl_checker.py").read_bytes()).hexdigest()[:12]
            return {"bfcl-eval": bfcl.BFCL_VERSION, "argym-bfcl-checker": checker}
        graded = b"".join((here / name).read_bytes() for name in ("tools.py", "env.py", "grading.py"))
        tools = hashlib.sha256(graded).hexdigest()[:12]
        return {"argym-toolcall-tools": tools}

    def close(self) -> None:
        """Stop the MCP server's session (a stdio server's process with it) and its event loop."""
        mcp = getattr(self, "mcp", None)
        if mcp is not None:
            mcp.close()
        super().close()
