"""Transcripts: bounded in size, with visible markers, and cut only once."""

from __future__ import annotations

import json

from argym.transcript import (
    HEAD_CHARS,
    HEAD_MESSAGES,
    MAX_VERDICT_CHARS,
    TAIL_CHARS,
    TAIL_MESSAGES,
    bound_transcript,
    transcript,
)
from argym.types import Trajectory


def _traj(messages, verdict=None) -> Trajectory:
    return Trajectory(
        task_id="t",
        messages=messages,
        reward=0.0,
        success=False,
        turns=1,
        terminated=True,
        truncated=False,
        infos=[{"verdict": verdict}],
        finish_reason="stop",
    )


def test_a_long_message_keeps_head_and_tail_with_a_marker():
    text = "A" * 10_000 + "END"
    t = transcript(_traj([{"role": "assistant", "content": text}]))
    shown = t["messages"][0]["content"]
    assert shown.startswith("A" * HEAD_CHARS) and shown.endswith("END")
    assert f"[... {10_003 - HEAD_CHARS - TAIL_CHARS} chars cut ...]" in shown
    assert len(shown) < HEAD_CHARS + TAIL_CHARS + 64


def test_a_long_episode_keeps_its_first_and_last_messages():
    msgs = [{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(100)]
    t = transcript(_traj(msgs))
    assert len(t["messages"]) == HEAD_MESSAGES + TAIL_MESSAGES + 1
    assert t["messages"][0]["content"] == "m0" and t["messages"][-1]["content"] == "m99"
    assert t["messages"][HEAD_MESSAGES] == {"role": "cut", "content": "[... 61 messages cut ...]"}


def test_a_huge_verdict_is_cut_and_a_small_one_kept_as_json():
    assert transcript(_traj([], {"parsed": "4", "correct": False}))["verdict"] == {
        "parsed": "4",
        "correct": False,
    }
    big = transcript(_traj([], {"log": "x" * 50_000}))["verdict"]
    assert isinstance(big, str) and "chars cut" in big and len(big) < MAX_VERDICT_CHARS + 64


def test_tool_calls_are_shown_even_with_empty_content():
    call = [{"type": "function", "function": {"name": "add", "arguments": "{}"}}]
    t = transcript(_traj([{"role": "assistant", "content": "", "tool_calls": call}]))
    assert '"name": "add"' in t["messages"][0]["content"]


def test_bounding_again_changes_nothing_and_bounds_a_hand_made_one():
    msgs = [{"role": "assistant", "content": "y" * 9_000} for _ in range(80)]
    once = transcript(_traj(msgs, {"v": "z" * 9_000}))
    assert bound_transcript(json.loads(json.dumps(once))) == once
    raw = {"messages": msgs, "verdict": {"v": "z" * 9_000}}
    assert bound_transcript(raw)["messages"] == once["messages"]
