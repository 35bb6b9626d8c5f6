"""Bad input: malformed actions never raise, never hang, never earn a reward, and end in a clear observation.

Each action of `MALFORMED` is sent as the first turn of a fresh episode. The
step must return in time without raising, with a reward no higher than 0,
and either the env says something (a message after the agent's turn) or the
episode ends. An env whose actions are plain strings still gets the non-string
cases: an agent's output parser can hand anything to `step`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from argym.check.base import FAIL, PASS, Hang, Outcome, Subject, short

NAME = "bad_input"

_DEEP = "[" * 10_000 + "]" * 10_000
MALFORMED: tuple[tuple[str, Any], ...] = (
    ("empty", ""),
    ("whitespace", " \n\t "),
    ("huge", "x" * 1_000_000),
    ("lone surrogate", "answer \udcff\ud800"),
    ("control bytes", "\x00\x1b[31m\xff\ufffe"),
    ("bytes", b"\xff\xfe\x00answer"),
    ("None", None),
    ("int", 42),
    ("list", ["a", "b"]),
    ("message with user role", {"role": "user", "content": "I am the user now"}),
    ("message without content", {"role": "assistant"}),
    ("message with list content", {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
    ("broken tool call tag", '<tool_call>{"name": "run", "arguments": {broken</tool_call>'),
    (
        "tool call with wrong types",
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": 1, "type": "function", "function": {"name": 5, "arguments": "{not json"}}],
        },
    ),
    ("tool call to nothing", '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>'),
    ("deeply nested JSON", '<tool_call>{"name": "run", "arguments": %s}</tool_call>' % _DEEP),
    ("10,000 tool calls", '<tool_call>{"name": "x", "arguments": {}}</tool_call>' * 10_000),
)
"""Malformed actions: (name, action)."""


def check(subject: Subject) -> Outcome:
    problems: list[str] = []
    env: gym.Env | None = subject.make()
    try:
        for name, action in MALFORMED:
            if env is None:
                env = subject.make()
            try:
                subject.reset(env, seed=subject.config.seed, label=f"bad input {name}")
                obs, reward, terminated, truncated, info = subject.step(
                    env, action, label=f"bad input {name}"
                )
            except Hang as e:
                problems.append(f"{name}: {e}")
                env = None  # abandoned with its hung call
                continue
            except Exception as e:
                problems.append(f"{name}: step raised {type(e).__name__}: {short(str(e), 200)}")
                continue
            if float(reward) > 0:
                problems.append(f"{name}: earned reward {reward}")
            if not (terminated or truncated) and not _env_spoke(obs):
                problems.append(f"{name}: the episode goes on but the env said nothing about the turn")
    finally:
        if env is not None:
            subject.close(env)
    if problems:
        return Outcome(NAME, FAIL, "; ".join(problems)[:2000])
    return Outcome(
        NAME,
        PASS,
        f"{len(MALFORMED)} malformed actions: no raise, no hang, no reward, "
        f"each answered or ending the episode",
    )


def _env_spoke(obs: Any) -> bool:
    """True if the observation ends with something other than the agent's own turn."""
    if isinstance(obs, list) and obs and isinstance(obs[-1], dict):
        last = obs[-1]
        return last.get("role") != "assistant" and bool(str(last.get("content") or "").strip())
    return isinstance(obs, str) and bool(obs.strip())
