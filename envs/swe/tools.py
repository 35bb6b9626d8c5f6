"""SWE-v0's tools: OpenAI schemas, and their execution in the episode's workspace.

`view`, `search`, `str_replace`, `insert` and `create` run `toolscript` inside
the sandbox (paths outside the repository are refused there); `undo_edit`
restores a file from the host-side history of its edits; `run` is a shell
command in the repository with a timeout, its output cut to a head and a tail
(R2E-Gym keeps the first and last 40 lines, SWE-agent/mini-swe-agent the first
and last 5,000 characters); `submit` ends the episode (handled by the env).
Tool calls are read with `argym.envs.tools.calls`, so every call form of the
ToolCall env works here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from argym.envs.swe.workspace import Workspace
from argym.envs.tools.calls import ToolCall


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_PATH = {
    "type": "string",
    "description": "a path relative to the repository root (or absolute under /testbed)",
}
TOOLS: tuple[dict[str, Any], ...] = (
    _tool(
        "view",
        "Show a file with line numbers (optionally only view_range), or list a directory two levels deep.",
        {
            "path": _PATH,
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "[start, end], 1-based and inclusive; end -1 means to the end",
            },
        },
        ["path"],
    ),
    _tool(
        "search",
        "Find the lines containing a literal string in the repository (or under path).",
        {"search_term": {"type": "string"}, "path": _PATH},
        ["search_term"],
    ),
    _tool(
        "str_replace",
        "Replace the one occurrence of old_str in a file with new_str (old_str must be unique).",
        {"path": _PATH, "old_str": {"type": "string"}, "new_str": {"type": "string"}},
        ["path", "old_str", "new_str"],
    ),
    _tool(
        "insert",
        "Insert new_str after line insert_line of a file (0: at the top).",
        {"path": _PATH, "insert_line": {"type": "integer"}, "new_str": {"type": "string"}},
        ["path", "insert_line", "new_str"],
    ),
    _tool(
        "create",
        "Create a new file holding file_text.",
        {"path": _PATH, "file_text": {"type": "string"}},
        ["path", "file_text"],
    ),
    _tool(
        "undo_edit",
        "Undo the last edit (str_replace, insert or create) made to a file.",
        {"path": _PATH},
        ["path"],
    ),
    _tool(
        "run",
        "Run a bash command in the repository root (no network); its output is cut to its head and tail.",
        {"command": {"type": "string"}, "timeout": {"type": "integer", "description": "seconds (capped)"}},
        ["command"],
    ),
    _tool("submit", "Submit the repository's current state as your fix; this ends the episode.", {}, []),
)


@lru_cache(maxsize=1)
def toolscript_source() -> str:
    return (Path(__file__).parent / "toolscript.py").read_text(encoding="utf-8")


def truncate(text: str, max_chars: int) -> str:
    """`text` cut to its first and last `max_chars` // 2 characters, saying how much was cut."""
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


class ToolBox:
    """Executes tool calls in one workspace; holds the per-file undo history of the episode."""

    def __init__(self, ws: Workspace, command_timeout_s: float = 60.0, max_output_chars: int = 10_000):
        self.ws = ws
        self.command_timeout_s = float(command_timeout_s)
        self.max_output_chars = int(max_output_chars)
        self.history: dict[str, list[str | None]] = {}

    def call(self, call: ToolCall) -> tuple[str, dict[str, Any]]:
        """(the tool message's text, a verdict entry ``{"tool", "ok", ...}``); never raises for the agent's input."""
        a = call.arguments
        if call.name == "run":
            return self.run(a["command"], a.get("timeout"))
        if call.name == "undo_edit":
            return self.undo(a["path"])
        req = {"op": call.name, **a}
        reply = self._script(req)
        if reply["ok"] and call.name in ("str_replace", "insert", "create"):
            self.history.setdefault(reply["path"], []).append(reply["old"])
        return reply["output"], {"tool": call.name, "ok": reply["ok"]}

    def run(self, command: str, timeout: Any = None) -> tuple[str, dict[str, Any]]:
        limit = (
            self.command_timeout_s
            if not isinstance(timeout, int) or timeout <= 0
            else min(timeout, self.command_timeout_s)
        )
        r = self.ws.exec(["bash", "-c", command], timeout_s=limit)
        out = truncate((r.stdout + r.stderr).rstrip("\n"), self.max_output_chars)
        if r.timed_out:
            head = f"The command timed out after {limit:g} s and was killed."
        elif r.output_truncated:
            head = (
                f"The command wrote more than {self.ws.limits.output_bytes} bytes of output and was killed."
            )
        elif r.signal is not None:
            head = f"The command was killed by signal {r.signal}."
        else:
            head = f"Exit code: {r.exit_code}"
        return f"{head}\n{out}" if out else head, {
            "tool": "run",
            "ok": r.exit_code == 0 and not r.timed_out,
            "exit_code": r.exit_code,
            "timed_out": r.timed_out,
            "output_truncated": r.output_truncated,
        }

    def undo(self, path: str) -> tuple[str, dict[str, Any]]:
        where = self._script({"op": "resolve", "path": path})
        stack = self.history.get(where["path"]) if where["ok"] else None
        if not stack:
            msg = where["output"] if not where["ok"] else f"Error: there is no edit of {path} to undo."
            return msg, {"tool": "undo_edit", "ok": False}
        reply = self._script({"op": "restore", "path": path, "content": stack[-1]})
        if reply["ok"]:
            stack.pop()
        return reply["output"], {"tool": "undo_edit", "ok": reply["ok"]}

    def _script(self, req: dict[str, Any]) -> dict[str, Any]:
        r = self.ws.exec(
            ["python3", "-I", "-S", "-c", toolscript_source()], stdin=json.dumps(req).encode(), timeout_s=30
        )
        try:
            reply = json.loads(r.stdout)
            if isinstance(reply, dict) and "ok" in reply:
                return reply
        except ValueError:
            pass
        why = "timed out" if r.timed_out else f"failed (exit {r.exit_code}): {r.stderr.strip()[-300:]}"
        return {"ok": False, "output": f"Error: the {req['op']} tool {why}.", "old": None, "path": ""}
