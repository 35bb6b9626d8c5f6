"""The rules a played trajectory's tokens are held to (the tokens check, argym/check/tokens.py).

The learner must train on exactly what the sampler saw. Each `Episode` the
tokens check plays is held to:

- exact: each turn's prompt is the trajectory so far, token for token, and
  the sampled ids follow it verbatim;
- mask: the loss mask is 1 on exactly the sampled ids;
- env outside: every message the env sent is found in the unmasked text;
- calls (templates that render tool calls themselves): a tool-call turn is
  written as the template writes it with object arguments, Hugging Face's
  convention (argym's messages carry OpenAI's JSON string);
- fresh: the recorded ids equal the chat template's rendering of the whole
  conversation, tokenized afresh (what a trainer that re-renders, or a
  server that takes messages, would feed the model).

A failure names the first differing token: its position, expected and got,
and the decoded text around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from argym.agents.renderer import with_object_arguments
from argym.check.base import short
from argym.types import Message, Trajectory


@dataclass
class Finding:
    """What one trajectory got wrong: which property, where, and the evidence."""

    play: str
    rule: str
    position: int
    detail: str

    def __str__(self) -> str:
        return f"{self.play}: {self.rule} at token {self.position}: {self.detail}"


@dataclass
class Episode:
    """One played episode: the trajectory, what the policy was fed and sampled, and the tools it was rendered with."""

    play: str
    trajectory: Trajectory
    prompts: list[list[int]]
    completions: list[list[int]]
    tools: Any = None
    findings: list[Finding] = field(default_factory=list)
    as_objects: dict[int, list[int]] = field(default_factory=dict)
    """Turn → the ids its tool calls get with object arguments, where argym's (string arguments) differ."""


def fresh_ids(tokenizer: Any, messages: list[Message], tools: Any) -> list[int]:
    """The chat template's rendering of the whole conversation, tokenized at once."""
    kwargs: dict[str, Any] = {"tokenize": False}
    if tools:
        kwargs["tools"] = list(tools)
    # tool-call arguments as objects: Hugging Face's convention, the form its templates are written for
    text = tokenizer.apply_chat_template([with_object_arguments(m) for m in messages], **kwargs)
    return list(tokenizer.encode(text, add_special_tokens=False))


def first_difference(expected: list[int], got: list[int]) -> int | None:
    """The first position where `got` is not `expected`'s prefix (None when it is)."""
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return i
    return None if len(got) <= len(expected) else len(expected)


def _token(tokenizer: Any, ids: list[int], i: int) -> str:
    if i >= len(ids):
        return "(end)"
    return f"{ids[i]} {tokenizer.decode([ids[i]], skip_special_tokens=False)!r}"


def window(tokenizer: Any, ids: list[int], i: int, mask: list[int] | None = None, width: int = 24) -> str:
    """The decoded text around position `i`, the token at `i` in ⟦ ⟧; with `mask`, sampled text in « »."""

    def text(lo: int, hi: int) -> str:
        out, span = "", list[tuple[int, bool]]()
        for j in range(lo, min(hi, len(ids))):
            on = bool(mask and j < len(mask) and mask[j])
            if span and on != span[0][1]:
                out += _piece(tokenizer, span)
                span = []
            span.append((ids[j], on))
        return out + (_piece(tokenizer, span) if span else "")

    at = tokenizer.decode(ids[i : i + 1], skip_special_tokens=False) if i < len(ids) else ""
    return repr(text(max(0, i - width), i) + f"⟦{at}⟧" + text(i + 1, i + 1 + width))


def _piece(tokenizer: Any, span: list[tuple[int, bool]]) -> str:
    s = tokenizer.decode([t for t, _ in span], skip_special_tokens=False)
    return f"«{s}»" if span[0][1] else s


def inspect(episode: Episode, tokenizer: Any) -> list[Finding]:
    """Every rule one trajectory breaks (an empty list: it is exact); each finding names its first bad token."""
    traj, name, found = episode.trajectory, episode.play, []
    ids, mask = traj.token_ids, traj.loss_mask
    # exact: each turn's prompt is the trajectory so far, the sampled ids follow it verbatim
    sampled = [0] * len(ids)
    for k, (prompt, completion) in enumerate(zip(episode.prompts, episode.completions)):
        i = first_difference(prompt, ids[: len(prompt)]) if len(ids) >= len(prompt) else len(ids)
        if i is None and len(ids) < len(prompt):
            i = len(ids)
        if i is not None:
            found.append(
                Finding(
                    name,
                    f"turn {k}'s prompt is not the recorded trajectory",
                    i,
                    f"fed {_token(tokenizer, prompt, i)}, recorded {_token(tokenizer, ids, i)}; "
                    f"fed {window(tokenizer, prompt, i)}",
                )
            )
            return found
        end = len(prompt) + len(completion)
        j = first_difference(completion, ids[len(prompt) : end])
        if j is not None or end > len(ids):
            at = len(prompt) + (j or 0)
            found.append(
                Finding(
                    name,
                    f"turn {k}'s sampled ids are not recorded verbatim",
                    at,
                    f"sampled {_token(tokenizer, completion, j or 0)}, recorded {_token(tokenizer, ids, at)}; "
                    f"context {window(tokenizer, ids, at, mask)}",
                )
            )
            return found
        sampled[len(prompt) : end] = [1] * len(completion)
    # mask: exactly the sampled ids
    for i, (m, s) in enumerate(zip(mask, sampled)):
        if bool(m) != bool(s):
            what = "env or prompt token inside the loss mask" if m else "sampled token outside the loss mask"
            found.append(
                Finding(
                    name, what, i, f"{_token(tokenizer, ids, i)}; context {window(tokenizer, ids, i, mask)}"
                )
            )
            break
    if len(mask) != len(ids):
        found.append(Finding(name, "loss mask and token ids differ in length", min(len(mask), len(ids)), ""))
    # env outside: every message the env sent (after the first turn) is in the unmasked text
    env_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
    first = next((i for i, m in enumerate(traj.messages) if m.get("role") == "assistant"), len(traj.messages))
    pos = 0  # the env's last reply ends the episode: the policy never sees it
    for reply in _replies_shown(traj.messages[first:], len(traj.turn_ends) - 1):
        content = str(reply.get("content") or "")
        at = env_text.find(content, pos)
        if at < 0:
            found.append(
                Finding(
                    name,
                    f"a {reply.get('role')} message the env sent is not in the unmasked text",
                    -1,
                    f"missing {short(content, 120)!r}",
                )
            )
            break
        pos = at + len(content)
    # calls: a tool-call turn as the template writes it with object arguments (its own convention)
    for k, objects in sorted(episode.as_objects.items())[:1]:
        got, at = episode.completions[k], len(episode.prompts[k])
        j = first_difference(objects, got) or 0
        found.append(
            Finding(
                name,
                f"turn {k}'s tool calls are written otherwise than the template writes them",
                at + j,
                f"with arguments as an object {_token(tokenizer, objects, j)}, as argym passes them (a JSON "
                f"string) {_token(tokenizer, got, j)}; expected {window(tokenizer, objects, j)}, "
                f"got {window(tokenizer, got, j)}",
            )
        )
    # fresh: the template's rendering of the whole conversation, tokenized afresh
    expected = fresh_ids(tokenizer, traj.messages, episode.tools)
    i = first_difference(expected, ids)
    if i is not None:
        found.append(
            Finding(
                name,
                "recorded ids differ from a fresh rendering of the conversation",
                i,
                f"expected {_token(tokenizer, expected, i)}, got {_token(tokenizer, ids, i)}; "
                f"expected {window(tokenizer, expected, i)}, got {window(tokenizer, ids, i, mask)}; "
                + _where(i, mask),
            )
        )
    return found


def _where(i: int, mask: list[int]) -> str:
    """What a difference from the fresh rendering at `i` most likely means, by where it falls."""
    if i < len(mask) and mask[i]:
        return (
            "inside a sampled turn: the template writes the assistant's message otherwise than the policy "
            "generated it (an empty <think> block on the last turn, tool calls in another layout); "
            "training keeps the sampled ids, a server that takes messages would show the model other text"
        )
    return (
        "in env text: the env's messages render otherwise after the policy's turns than in the whole "
        "conversation (consecutive tool results split, a special token dropped, or a template that "
        "rewrites earlier turns)"
    )


def _replies_shown(messages: list[Message], turns: int) -> list[Message]:
    """The env's messages that follow the first `turns` assistant turns (the ones the policy was shown)."""
    out: list[Message] = []
    seen = 0
    for m in messages:
        if m.get("role") == "assistant":
            seen += 1
            if seen > turns:
                break
        elif seen:
            out.append(m)
    return out
