"""Steps and their token spans: a step reward must land on the step's last policy token."""

from __future__ import annotations

import itertools

import pytest

from argym.agents.renderer import ChatRenderer, conversation_ids
from argym.agents.tiny import build_tiny_tokenizer
from argym.rewards.steps import render_text, split_steps, split_text, step_prefix
from argym.types import Trajectory


@pytest.fixture(scope="module")
def renderer():
    return ChatRenderer(build_tiny_tokenizer())


def trajectory(renderer, messages):
    """A trajectory laid out exactly as the rollout engine lays one out (policy ids never re-tokenized)."""
    ids, mask = conversation_ids(renderer, messages)
    ends = [p for p in range(len(mask)) if mask[p] and (p + 1 == len(mask) or not mask[p + 1])]
    n_turns = sum(m["role"] == "assistant" for m in messages)
    return Trajectory(
        task_id="t",
        messages=messages,
        reward=1.0,
        success=True,
        turns=n_turns,
        terminated=True,
        truncated=False,
        infos=[{} for _ in range(n_turns)],
        token_ids=ids,
        loss_mask=mask,
        turn_rewards=[0.0] * n_turns,
        turn_ends=ends,
    )


def test_split_text_on_blank_lines():
    text = "First.\n\nSecond step.\n\n\n\nLast"
    spans = split_text(text)
    assert [text[a:b] for a, b in spans] == ["First.\n\n", "Second step.\n\n\n\n", "Last"]
    assert split_text("no separator") == [(0, 12)]
    assert ["a;b"[a:b] for a, b in split_text("a;b", ";")] == ["a;", "b"]
    with pytest.raises(ValueError):
        split_text("x", "")


def test_layout_is_never_a_step_of_its_own():
    """Pieces without a letter or digit (a rule, a fence, blank lines) join a neighbouring step."""
    text = "---\n\nFirst.\n\n```\n\n\\boxed{2}\n\n* *"
    assert [text[a:b] for a, b in split_text(text)] == ["---\n\nFirst.\n\n```\n\n", "\\boxed{2}\n\n* *"]


def test_single_turn_steps_map_to_their_last_tokens(renderer):
    answer = "Let me check this again.\n\n12 + 30 = 42\n\n\\boxed{42}"
    traj = trajectory(
        renderer, [{"role": "user", "content": "What is 12 + 30?"}, {"role": "assistant", "content": answer}]
    )
    steps = split_steps(traj, decode=renderer.decode)
    assert [s.text for s in steps] == ["Let me check this again.\n\n", "12 + 30 = 42\n\n", "\\boxed{42}"]
    # spans tile the turn's policy tokens, and each step's text is exactly its tokens
    assert steps[0].start == traj.prompt_length and steps[-1].end == traj.turn_ends[0]
    for a, b in itertools.pairwise(steps):
        assert b.start == a.end + 1
    for s in steps[:-1]:
        assert renderer.decode(traj.token_ids[s.start : s.end + 1]) == s.text
        assert renderer.decode(traj.token_ids[s.end : s.end + 1]) == "\n"  # the separator's last token
    assert renderer.decode(traj.token_ids[steps[-1].start : steps[-1].end + 1]) == "\\boxed{42}<|im_end|>"
    assert all(traj.loss_mask[s.start] and traj.loss_mask[s.end] for s in steps)
    # without a decoder the segments keep their text but have no span
    assert [s.end for s in split_steps(traj)] == [-1, -1, -1]
    # step prefixes: the question plus the steps so far
    assert step_prefix(traj, steps, 1)[-1]["content"] == "Let me check this again.\n\n12 + 30 = 42\n\n"
    assert render_text(step_prefix(traj, steps, 0)).startswith("user: What is 12 + 30?\nassistant: Let me")


def test_multi_turn_steps_are_the_assistant_turns(renderer):
    messages = [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "\\boxed{5}\n\nok"},
        {"role": "user", "content": "Incorrect, try again."},
        {"role": "assistant", "content": "\\boxed{4}"},
    ]
    traj = trajectory(renderer, messages)
    steps = split_steps(traj, decode=renderer.decode)
    assert [s.text for s in steps] == ["\\boxed{5}\n\nok", "\\boxed{4}"]  # turns are not split further
    assert [s.end for s in steps] == traj.turn_ends
    for s, m in zip(steps, ["\\boxed{5}\n\nok", "\\boxed{4}"]):
        assert renderer.decode(traj.token_ids[s.start : s.end + 1]) == m + "<|im_end|>"
    assert step_prefix(traj, steps, 1)[:3] == messages[:3]


def test_a_single_step_answer_is_one_step_on_the_turn_end(renderer):
    traj = trajectory(
        renderer, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "\\boxed{1}"}]
    )
    (step,) = split_steps(traj, decode=renderer.decode)
    assert (step.start, step.end) == (traj.prompt_length, traj.turn_ends[0])
