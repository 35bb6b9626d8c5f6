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
    body.append("verdict: ", style="bold")
    body.append(describe_verdict(t.get("verdict")))
    if t.get("finish_reason"):
        body.append(f"\nfinished: {t['finish_reason']}", style="dim")
    out.print(header)
    out.print(Panel(body, border_style=style))


def describe_verdict(verdict: Any) -> str:
    """A verdict as text: ``parsed: 90 · correct: no · reason: mismatch`` (nested values as compact JSON)."""
    if not isinstance(verdict, dict):
        return "none" if verdict is None else str(verdict)

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if v is None:
            return "none"
        if isinstance(v, float):
            return f"{v:.4g}"
        return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)

    return " · ".join(f"{k}: {value(v)}" for k, v in verdict.items()) or "none"


def describe_step(reward: float, info: dict[str, Any]) -> str:
    """One step's outcome: ``reward 1 = outcome 1 × 1 + format 1 × 0 · solved``.

    An env whose verdict holds its parts unweighted (``verdict["parts"]``) with their ``weights`` (ToolCall)
    shows them so; otherwise the step's reward parts are shown as they are.
    """
    verdict = info.get("verdict") if isinstance(info.get("verdict"), dict) else {}
    parts, weights = info.get("reward_parts") or {}, {}
    if isinstance(verdict.get("parts"), dict) and isinstance(verdict.get("weights"), dict):
        parts, weights = verdict["parts"], verdict["weights"]
    terms = [f"{k} {v:.4g}" + (f" × {weights[k]:g}" if k in weights else "") for k, v in parts.items()]
    shown = f"reward {reward:.4g}" + (f" = {' + '.join(terms)}" if terms else "")
    return shown + (" · solved" if info.get("success") else " · not solved")
