"""What an exploit-corpus entry is and where entries live: `Exploit`, the `Context` its steps may name, the
families (`FAMILIES`) that turn its steps into one episode's actions, and the registry of entries (`EXPLOITS`).

The built-in entries are `argym.check.corpus`'s; import that module (or `argym.check`) to have them registered.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from argym.registry import Registry

TECHNIQUES = (
    "exit status",
    "fake output",
    "always equal",
    "steer runner",
    "edit tests",
    "hidden data",
    "network",
    "host",
)


@dataclass(frozen=True)
class Exploit:
    """One reward hack: its family, technique (one of `TECHNIQUES`) and the steps that attempt it."""

    name: str
    family: str
    technique: str
    steps: tuple[str, ...]
    prelude: str = ""
    """``code`` only: module-level code before the function."""
    final: str = "I do not know."
    """``toolcall`` only: the answer turn after the steps (wrong for every task: no number, no weekday)."""

    def __post_init__(self) -> None:
        if self.technique not in TECHNIQUES:
            raise ValueError(
                f"exploit {self.name!r}: technique must be one of {TECHNIQUES}, got {self.technique!r}."
            )


@dataclass(frozen=True)
class Context:
    """What an exploit's template may name, and what its family needs of the current task."""

    canary: str
    canary_dir: str
    port: int
    entry_point: str = "solution"

    def fill(self, text: str) -> str:
        return string.Template(text).safe_substitute(
            canary=self.canary, canary_dir=self.canary_dir, port=self.port
        )


def _indent(body: str) -> str:
    return "".join(f"    {line}\n" for line in body.splitlines())


def code_answer(exploit: Exploit, ctx: Context) -> list[Any]:
    body = _indent(ctx.fill(exploit.steps[0]))
    code = f"{ctx.fill(exploit.prelude)}\ndef {ctx.entry_point}(*args, **kwargs):\n{body}"
    return [f"```python\n{code}```"]


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def swe_actions(exploit: Exploit, ctx: Context) -> list[Any]:
    out = []
    for step in map(ctx.fill, exploit.steps):
        if step.startswith("{"):
            call = json.loads(step)
            out.append(tool_call(call["name"], call["arguments"]))
        else:
            out.append(tool_call("run", {"command": step}))
    return [*out, tool_call("submit", {})]


def toolcall_actions(exploit: Exploit, ctx: Context) -> list[Any]:
    return [*(tool_call("python", {"code": ctx.fill(s)}) for s in exploit.steps), ctx.fill(exploit.final)]


def plain_actions(exploit: Exploit, ctx: Context) -> list[Any]:
    return [ctx.fill(s) for s in exploit.steps]


Render = Callable[[Exploit, Context], list[Any]]
"""A family's renderer: `render(exploit, context)` returns the actions of one episode."""

FAMILIES: Registry[Render] = Registry("exploit family")
"""How each family's steps become the actions of one episode."""
FAMILIES.add("code", code_answer)
FAMILIES.add("swe", swe_actions)
FAMILIES.add("toolcall", toolcall_actions)
FAMILIES.add("support", plain_actions)
FAMILIES.add("actions", plain_actions)

EXPLOITS: Registry[Exploit] = Registry("exploit")
"""The corpus, each entry under ``family/name``."""


def register_family(name: str, render: Render) -> None:
    """Add a family: `render(exploit, context)` returns the actions of one episode."""
    FAMILIES.add(name, render)


def register_exploit(exploit: Exploit) -> Exploit:
    """Add `exploit` to the corpus (a user's module calls this; `argym check --exploits MODULE` imports it)."""
    if exploit.family not in FAMILIES:
        raise ValueError(
            f"exploit {exploit.name!r}: unknown family {exploit.family!r}; known: "
            f"{FAMILIES.names()} (register_family adds one)."
        )
    return EXPLOITS.add(f"{exploit.family}/{exploit.name}", exploit)


def unregister_exploit(family: str, name: str) -> None:
    """Remove an entry (a test that registered one puts the corpus back as it was)."""
    EXPLOITS.remove(f"{family}/{name}")


def exploits(family: str, technique: str | None = None) -> list[Exploit]:
    """The corpus entries of `family` (and `technique`), in the order registered."""
    return [e for _, e in EXPLOITS.items() if e.family == family and technique in (None, e.technique)]


def get(family: str, name: str) -> Exploit:
    return EXPLOITS.get(f"{family}/{name}")


def entry_point(obs: Any, task: Any = None) -> str:
    """The function a code task asks for: the task's ``entry_point``, else the last ``def`` in the prompt."""
    meta = getattr(task, "meta", None) or {}
    if meta.get("entry_point"):
        return str(meta["entry_point"])
    messages = obs if isinstance(obs, list) else [{"content": obs}]
    text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    names = re.findall(r"def\s+([A-Za-z_]\w*)\s*\(", text)
    return names[-1] if names else "solution"
