"""`argym/SWE-v0`: fix a real repository through tools; graded by its tests in a fresh sandbox.

The agent gets an issue text and a repository at ``/testbed`` checked out at the
instance's base commit (one fresh commit: no later history, tags, reflog or
remotes). It works through tools (`argym.envs.swe.tools`: ``view``, ``search``,
``str_replace``, ``insert``, ``create``, ``undo_edit``, ``run``, ``submit``),
called in any form `argym.envs.tools.calls` reads (OpenAI ``tool_calls``,
OpenAI-style JSON text, ``<tool_call>`` tags). ``submit`` ends the episode; so
does the turn limit or the time limit, after which the workspace is graded as
it stands (``verdict["auto_submitted"]``).

Grading (`argym.envs.swe.grading`) takes the agent's diff against the base
commit (test files and test-run configuration excluded), applies it and the
instance's ``test_patch`` in a fresh workspace, runs the tests and parses the
log with swebench's parser. Reward 1 if every FAIL_TO_PASS and PASS_TO_PASS
test passes, else 0; ``info["verdict"]["tests"]`` has each test's status. The
workspace cannot steer that run (pytest's configuration, plugins and the diff's
git configuration are the grader's), and a run tampered with from inside (the
grader's sentinel tests misreported) scores 0 with ``verdict["tampered"]``
(docs/swe_grading.md).

Backends (``sandbox=``): ``process`` (default; bubblewrap) or ``docker`` (one
container per workspace from the ``argym-swe`` image); see
`argym.envs.swe.workspace`. A real SWE-bench instance (an ``image`` and
``eval_script`` in its row) runs on ``docker`` only, in containers of its own image:
`argym.envs.swe.swebench_images`. `snapshot()` copies the workspace for real.

Example::

    env = argym.make("argym/SWE-v0", split="test")
    obs, info = env.reset(seed=0)     # [system (tools, rules), user (the issue)]
    obs, r, term, trunc, info = env.step('<tool_call>{"name": "run", "arguments": {"command": "git log --oneline"}}</tool_call>')
    # obs[-1] == {"role": "tool", "tool_call_id": "call_0", "name": "run", "content": "Exit code: 0\\n53745f5 base"}
    obs, r, term, trunc, info = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    # r == 0.0, term is True, info["verdict"]["FAIL_TO_PASS"] == {"passed": 0, "total": 1}
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from typing import Any

from argym.envs.base import EnvState, Reply, TextEnv
from argym.envs.executors import Executors
from argym.envs.sandbox.base import Sandbox, SandboxName, make_sandbox
from argym.envs.swe import diffs, grading
from argym.envs.swe.instances import Instance, instance_of, swe_tasks
from argym.envs.swe.project import base_repo
from argym.envs.swe.swebench_images import open_image_workspace
from argym.envs.swe.tools import TOOLS, ToolBox
from argym.envs.swe.workspace import DEFAULT_LIMITS, SWE_IMAGE, Workspace, open_workspace
from argym.envs.tasks import TaskSource
from argym.envs.tools.calls import ToolCall, check_call, format_calls, parse_tool_calls, tool_message
from argym.errors import ConfigError, EnvStateError, InfrastructureError, MissingDependencyError
from argym.types import Message, Task

PROMPT = """You are fixing an issue in the repository at /testbed (a git repository at its base commit).
Work only through these tools (OpenAI function schemas):
{schemas}
Call a tool with <tool_call>{{"name": "...", "arguments": {{...}}}}</tool_call> (several per turn are allowed),
or with OpenAI tool_calls. Paths are relative to /testbed. Commands have no network.
Edit the source, not the tests (changes to test files are not counted). When the issue is fixed,
call submit; your changes are then graded by the repository's tests in a fresh copy."""

COMPACT_PROMPT = """Fix the issue in the repository at /testbed. Tools: {names}.
Call one as <tool_call>{{"name": "...", "arguments": {{...}}}}</tool_call>; call submit when done."""


def swe_sandbox(executors: Executors, backend: str) -> Sandbox:
    """`executors`' sandbox for SWE workspaces on `backend`, built on first use (4 slots: agents'
    commands and graders share it). Not the code envs' one: a workspace needs mounts or the SWE image."""
    if backend not in ("process", "docker"):
        raise ConfigError(f"SWE-v0's sandbox must be 'process' or 'docker', got {backend!r}.")
    extra = {"image": SWE_IMAGE} if backend == "docker" else {}
    return executors.shared(f"swe/{backend}", lambda: make_sandbox(backend, slots=4, **extra))


@dataclass
class SWEState(EnvState):
    """`EnvState` plus a real copy of the workspace and the tools' undo history."""

    workspace: dict[str, Any] = field(default_factory=dict)
    history: dict[str, list[str | None]] = field(default_factory=dict)
    elapsed_s: float = 0.0


class SWEEnv(TextEnv):
    """Repository-level bug fixing with tools; see the module docstring.

    `max_turns` and `time_limit_s` (seconds spent in tools) bound an episode;
    `command_timeout_s` one ``run``; `test_timeout_s` the grading run;
    `max_output_chars` what a tool message shows (head and tail); `compact_prompt` lists the
    tools by name and arguments instead of full schemas (for small-context models).
    """

    metadata = {**TextEnv.metadata, "argym.exploits": "swe"}  # `argym check` runs this corpus family

    def __init__(
        self,
        tasks: Any = "shipped",
        split: str = "test",
        sandbox: SandboxName | Sandbox = "process",
        max_turns: int = 30,
        time_limit_s: float = 1800.0,
        command_timeout_s: float = 60.0,
        test_timeout_s: float = 300.0,
        max_output_chars: int = 10_000,
        oracle_style: str = "hermes",
        compact_prompt: bool = False,
        render_mode: str | None = None,
        executors: Executors | None = None,
    ):
        if find_spec("swebench") is None:
            raise MissingDependencyError(
                "swebench", "swe", "argym/SWE-v0 (its grader reads test logs with swebench's parsers)"
            )
        for name, value in (
            ("time_limit_s", time_limit_s),
            ("command_timeout_s", command_timeout_s),
            ("test_timeout_s", test_timeout_s),
            ("max_output_chars", max_output_chars),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"{name} must be a positive number, got {value!r}.")
        if not isinstance(sandbox, Sandbox) and sandbox not in ("process", "docker"):
            raise ConfigError(f"SWE-v0's sandbox must be 'process', 'docker' or a Sandbox, got {sandbox!r}.")
        self._sandbox_spec = sandbox
        self.time_limit_s = float(time_limit_s)
        self.command_timeout_s = float(command_timeout_s)
        self.test_timeout_s = float(test_timeout_s)
        self.max_output_chars = int(max_output_chars)
        self.oracle_style = oracle_style
        self.compact_prompt = bool(compact_prompt)
        self._ws: Workspace | None = None
        self._tools: ToolBox | None = None
        self._elapsed = 0.0
        self._oracle: list[ToolCall] = []
        self._oracle_next = 0  # the oracle's plan position: calls it has handed out this episode
        super().__init__(
            tasks=tasks, split=split, max_turns=max_turns, render_mode=render_mode, executors=executors
        )

    @property
    def sandbox(self) -> Sandbox:
        """The `sandbox=` given, else the executors' SWE sandbox of that backend (the engine's, else this env's own)."""
        if isinstance(self._sandbox_spec, Sandbox):
            return self._sandbox_spec
        return swe_sandbox(self.executors, str(self._sandbox_spec))

    def load_tasks(self, tasks: Any) -> TaskSource:
        return swe_tasks(tasks)

    # ---- episodes ------------------------------------------------------------------
    def _workspace(self, instance: Instance, snapshot: dict[str, Any] | None = None) -> Workspace:
        """A workspace of `instance`: from its SWE-bench image (docker only), else from its shipped sources."""
        if instance.image:
            return open_image_workspace(self.sandbox, instance, DEFAULT_LIMITS, snapshot)
        return open_workspace(
            self.sandbox,
            base_repo(instance.sdist, instance.patch, instance.base_commit),
            DEFAULT_LIMITS,
            snapshot,
        )

    def _open(self, task: Task, snapshot: dict[str, Any] | None = None) -> None:
        self._close_workspace()
        self._ws = self._workspace(instance_of(task), snapshot)
        self._tools = ToolBox(self._ws, self.command_timeout_s, self.max_output_chars)
        self._elapsed = 0.0

    def begin(self, task: Task) -> list[Message]:
        self._open(task)
        self._oracle, self._oracle_next = [], 0
        if self.compact_prompt:  # small context models (the tiny CPU policy): names and arguments only
            names = ", ".join(
                f"{t['function']['name']}({', '.join(t['function']['parameters']['properties'])})"
                for t in TOOLS
            )
            system = COMPACT_PROMPT.format(names=names)
        else:
            system = PROMPT.format(schemas="\n".join(json.dumps(t) for t in TOOLS))
        return [{"role": "system", "content": system}, *[dict(m) for m in task.prompt]]  # type: ignore[list-item]

    def respond(self, action: Message) -> Reply:
        assert self._tools is not None
        turn = parse_tool_calls(action)
        if not turn.calls:
            said = " ".join(turn.errors) if turn.errors else "Your turn called no tool."
            msg = f"{said} Use the tools to work on the repository, and call submit when you are done."
            return self._maybe_last(
                Reply(
                    messages=[{"role": "user", "content": msg}],
                    reward_parts={"outcome": 0.0},
                    verdict={"calls": [], "errors": list(turn.errors)},
                )
            )
        messages: list[Message] = []
        results: list[dict[str, Any]] = []
        for call in turn.calls:
            problem = check_call(call, TOOLS)
            if problem is not None:
                messages.append(tool_message(call, f"Error: {problem}"))
                results.append({"tool": call.name, "ok": False})
                continue
            if call.name == "submit":
                messages.append(tool_message(call, "Submitted; grading your changes."))
                return self._finish(messages, {"calls": results, "errors": list(turn.errors)}, auto=False)
            start = time.monotonic()
            try:
                text, result = self._tools.call(call)
            except InfrastructureError as e:  # the sandbox could not run the tool: not the agent's doing
                return Reply(
                    messages=messages,
                    reward_parts={"outcome": 0.0},
                    terminated=True,
                    infra_failure=True,
                    verdict={"calls": results, "infra_failure": str(e)},
                )
            self._elapsed += time.monotonic() - start
            messages.append(tool_message(call, text))
            results.append(result)
            if call.name == "run" and self._ws is not None and self._ws.over_disk_limit():
                messages.append(
                    {
                        "role": "user",
                        "content": "The repository grew past the disk limit; the episode ends unresolved.",
                    }
                )
                return Reply(
                    messages=messages,
                    reward_parts={"outcome": 0.0},
                    terminated=True,
                    verdict={"calls": results, "resolved": False, "rejected": "disk_limit"},
                )
            if self._elapsed > self.time_limit_s:  # a limit, like the turn limit: graded, then truncated
                return _truncated(self._finish(messages, {"calls": results, "time_limit": True}, auto=True))
        if turn.errors:
            messages.append({"role": "user", "content": " ".join(turn.errors)})
        return self._maybe_last(
            Reply(
                messages=messages,
                reward_parts={"outcome": 0.0},
                verdict={"calls": results, "errors": list(turn.errors)},
            )
        )

    def _maybe_last(self, reply: Reply) -> Reply:
        """On the last turn the workspace is graded as it stands (the episode is then truncated)."""
        if self.turn + 1 < self.max_turns:
            return reply
        return _truncated(self._finish(reply.messages, reply.verdict, auto=True))

    def _finish(self, messages: list[Message], verdict: dict[str, Any], auto: bool) -> Reply:
        instance = instance_of(self.task)
        assert self._ws is not None
        try:
            result = self.grade_workspace(self._ws, instance)
        except InfrastructureError as e:
            return Reply(
                messages=messages,
                reward_parts={"outcome": 0.0},
                terminated=True,
                infra_failure=True,
                verdict={**verdict, "infra_failure": str(e)},
            )
        ok = bool(result["resolved"])
        return Reply(
            messages=messages,
            reward_parts={"outcome": 1.0 if ok else 0.0},
            terminated=True,
            success=ok,
            verdict={**verdict, **result, "auto_submitted": auto},
        )

    def grade_workspace(self, ws: Workspace, instance: Instance) -> dict[str, Any]:
        """Grade what `ws` holds against `instance`, in a fresh workspace (raises `InfrastructureError`)."""
        diff, why = diffs.agent_diff(ws, instance.base_commit)
        if diff is None:
            return {**grading.resolve(instance, {}, None), "rejected": why, "patch": "unreadable"}
        kept, files, dropped = diffs.split_diff(diff)
        fresh = self._workspace(instance)
        try:
            result = grading.grade(fresh, instance, kept, self.test_timeout_s)
        finally:
            fresh.close()
        return {**result, "changed_files": files, "ignored_files": dropped}

    # ---- oracle, snapshots, lifetime -------------------------------------------------------
    def oracle_action(self) -> str | Message:
        """The gold patch as ``str_replace`` calls, one per hunk, then ``submit``."""
        if not self._oracle:
            self._oracle = [*patch_to_calls(instance_of(self.task).patch), ToolCall("submit", {}, "call_0")]
        call = self._oracle[min(self._oracle_next, len(self._oracle) - 1)]
        self._oracle_next += 1
        return format_calls([ToolCall(call.name, call.arguments, "call_0")], self.oracle_style)

    def snapshot(self) -> SWEState:
        base = super().snapshot()
        if self._ws is None or self._tools is None:
            raise EnvStateError("Nothing to snapshot: call reset() first.")
        return SWEState(
            **vars(base),
            workspace=self._ws.snapshot(),
            history=copy.deepcopy(self._tools.history),
            elapsed_s=self._elapsed,
        )

    def restore(self, state: EnvState) -> None:
        """Restore from a real copy of the workspace (no replay of the commands)."""
        self.check_state(state, SWEState)
        assert isinstance(state, SWEState)
        self._open(state.task, state.workspace)
        assert self._tools is not None
        self._tools.history = copy.deepcopy(state.history)
        self._elapsed = state.elapsed_s
        self._oracle, self._oracle_next = [], len(state.actions)
        self.load_episode(state)

    def grader_versions(self) -> dict[str, str]:
        from importlib.metadata import version

        backend = self._sandbox_spec if isinstance(self._sandbox_spec, str) else self._sandbox_spec.backend
        return {"swebench": version("swebench"), "sandbox": str(backend)}

    def _close_workspace(self) -> None:
        if self._ws is not None:
            self._ws.close()
        self._ws, self._tools = None, None

    def close(self) -> None:
        self._close_workspace()
        super().close()


def _truncated(reply: Reply) -> Reply:
    """`reply` (the workspace graded as it stands) as the end of an episode cut by a limit."""
    reply.terminated, reply.truncated = False, True
    return reply


def patch_to_calls(patch: str) -> list[ToolCall]:
    """Each hunk of a unified diff as a ``str_replace`` (old lines → new lines) on its file."""
    calls: list[ToolCall] = []
    path, in_hunk = "", False
    old: list[str] = []
    new: list[str] = []

    def flush() -> None:
        if in_hunk and path:
            calls.append(
                ToolCall(
                    "str_replace",
                    {"path": path, "old_str": "\n".join(old), "new_str": "\n".join(new)},
                    f"call_{len(calls)}",
                )
            )

    for line in patch.splitlines():
        if line.startswith("diff --git "):
            flush()
            in_hunk, path = False, ""
        elif line.startswith("+++ "):
            path = line[4:].strip().removeprefix("b/")
        elif line.startswith("@@"):
            flush()
            in_hunk, old, new = True, [], []
        elif in_hunk and line.startswith("\\"):
            continue
        elif in_hunk and line[:1] in (" ", "-", "+", ""):
            body = line[1:]
            if line[:1] != "+":
                old.append(body)
            if line[:1] != "-":
                new.append(body)
    flush()
    return calls
