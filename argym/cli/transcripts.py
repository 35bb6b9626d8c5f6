"""Printing an episode's transcript in the terminal (`argym eval --show N`)."""

from __future__ import annotations

import json
from typing import Any

from argym.cli.common import console

ROLE_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "magenta", "cut": "yellow"}


def print_transcript(episode: dict[str, Any]) -> None:
    """One episode: a header with its outcome, each message under its role, then the verdict."""
    from rich.panel import Panel
    from rich.text import Text

    out = console()
    if episode["infra_failure"]:
        result, style = "INFRA FAILURE (not scored)", "yellow"
    else:
        result, style = ("PASS", "green") if episode["success"] else ("FAIL", "red")
    header = Text.assemble(
        (f"task {episode['task_id']}", "bold"),
        f" · sample {episode['sample']} · ",
        (result, f"bold {style}"),
        f" · reward {episode['reward']:.3g} · {episode['turns']} turn(s)",
    )
    t = episode.get("transcript") or {}
    body = Text()
    for m in t.get("messages", []):
        role = m.get("role", "?")
        body.append(f"{role}\n", style=f"bold {ROLE_STYLE.get(role, '')}".strip())
        body.append(m.get("content", "").rstrip() + "\n\n")
    verdict = t.get("verdict")
    body.append("verdict: ", style="bold")
    body.append(verdict if isinstance(verdict, str) else json.dumps(verdict, sort_keys=True))
    if t.get("finish_reason"):
        body.append(f"\nfinished: {t['finish_reason']}", style="dim")
    out.print(header)
    out.print(Panel(body, border_style=style))
