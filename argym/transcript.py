"""Transcripts: what the model wrote and what the env replied, bounded in size.

An eval result, a leaderboard submission and the training sample log keep one
transcript per episode so that "why is the reward 0" has an answer. Transcripts
are cut to fixed bounds so that a result file or a board stays small whatever
the model produced:

- each message's text keeps its first `HEAD_CHARS` and last `TAIL_CHARS`
  characters, with a visible ``[... N chars cut ...]`` marker between them;
- an episode keeps its first `HEAD_MESSAGES` and last `TAIL_MESSAGES` messages,
  with one ``{"role": "cut", ...}`` marker message between them;
- the verdict (the env's last ``info["verdict"]``) is kept as JSON when it
  serialises to at most `MAX_VERDICT_CHARS` characters, else as a cut string.

So one episode's transcript holds at most 40 messages of at most ~3,100
characters each, and a verdict of at most 2,000.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from argym.types import Trajectory

HEAD_CHARS = 2000
TAIL_CHARS = 1000
HEAD_MESSAGES = 20
TAIL_MESSAGES = 19
MAX_VERDICT_CHARS = 2000
SLACK = 64
"""Room for the marker: text at most this much over the bound is kept whole, so cutting is idempotent."""


def cut_text(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """`text` itself when short, else its head and tail with a marker saying how much was cut."""
    if len(text) <= head + tail + SLACK:  # a text cut once is not cut again
        return text
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} chars cut ...]\n{text[len(text) - tail :]}"


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def bound_verdict(verdict: Any) -> Any:
    """The verdict as plain JSON, or (when it is too long) its JSON text cut to size."""
    plain = _jsonable(verdict)
    if isinstance(plain, str):  # a verdict cut before (or a plain-text one) is cut as text
        return cut_text(plain, MAX_VERDICT_CHARS * 2 // 3, MAX_VERDICT_CHARS // 3)
    text = json.dumps(plain, sort_keys=True)
    if len(text) <= MAX_VERDICT_CHARS:
        return plain
    return cut_text(text, MAX_VERDICT_CHARS * 2 // 3, MAX_VERDICT_CHARS // 3)


def bound_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Role and (cut) text of each message, with the middle messages of a long episode cut."""
    out = [_message(m) for m in messages]
    if len(out) > HEAD_MESSAGES + TAIL_MESSAGES + 1:  # + 1: an episode cut once is not cut again
        cut = len(out) - HEAD_MESSAGES - TAIL_MESSAGES
        marker = {"role": "cut", "content": f"[... {cut} messages cut ...]"}
        out = [*out[:HEAD_MESSAGES], marker, *out[len(out) - TAIL_MESSAGES :]]
    return out


def _message(m: Any) -> dict[str, str]:
    if not isinstance(m, dict):
        return {"role": "?", "content": cut_text(str(m))}
    content = m.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    if m.get("tool_calls"):  # a tool call is what the model wrote, even with empty content
        text = (text + "\n" if text else "") + json.dumps(m["tool_calls"], default=str)
    return {"role": str(m.get("role", "?")), "content": cut_text(text)}


def transcript(traj: Trajectory) -> dict[str, Any]:
    """``{"messages": [{role, content}], "verdict": ..., "finish_reason": str}`` of one episode, bounded."""
    last = traj.infos[-1] if traj.infos else {}
    return {
        "messages": bound_messages(traj.messages),
        "verdict": bound_verdict(last.get("verdict")),
        "finish_reason": str(traj.finish_reason or ""),
    }


def bound_transcript(value: Any) -> dict[str, Any] | None:
    """A transcript from elsewhere (a submitted file), checked for shape and cut to the same bounds.

    Returns None for a missing transcript; raises ValueError for one of the wrong shape.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("messages", []), list):
        raise ValueError(f"expected {{'messages': [...], 'verdict': ...}}, got {value!r:.80}")
    return {
        "messages": bound_messages(value.get("messages", [])),
        "verdict": bound_verdict(value.get("verdict")),
        "finish_reason": cut_text(str(value.get("finish_reason") or ""), 100, 0),
    }
