"""A trajectory's steps, each mapped to its token span, so a step reward lands on the right token.

- Multi-turn (more than one assistant turn): a step is an assistant turn.
- Single turn: the answer is split into segments on a separator (default a
  blank line, as PURE splits on "\\n\\n"); the separator belongs to the step
  it ends, so the step's last token is the one that completes the separator
  (PURE scores at the separator token), and the last step ends on the turn's
  last policy token (end-of-turn included).

A step reward sits on `Step.end`, an index into `Trajectory.token_ids` (the
same convention as `turn_ends`). Trajectories without token ids (oracle, HTTP
agents) still get steps with their text; their spans are -1.

Token spans are found without re-tokenizing: the policy's own ids are decoded
prefix by prefix, and a step ends at the first token whose decoded prefix
covers the step's text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from argym.types import Message, Trajectory

DEFAULT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Step:
    """One step: the assistant turn it is in, its text and its token span (inclusive; -1 without tokens)."""

    turn: int
    text: str
    start: int = -1
    end: int = -1

    @property
    def num_tokens(self) -> int:
        return self.end - self.start + 1 if self.end >= 0 else 0


def assistant_turns(messages: Sequence[Message]) -> list[int]:
    """Indices of the assistant messages in a conversation."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def has_content(text: str) -> bool:
    """Whether `text` holds a letter or a digit: blank lines, rules (---), bullets and fences do not."""
    return any(c.isalnum() for c in text)


def split_text(text: str, separator: str = DEFAULT_SEPARATOR) -> list[tuple[int, int]]:
    """Character spans [a, b) of the segments of `text`, each ending after its separator.

    Pieces without content (`has_content`: separators in a row, trailing blank
    lines, a "---" rule, a lone code fence) join the step before them (or the one
    after, at the start), so every step has content and layout is never a step of
    its own: a PRM scoring it could otherwise set the min-form return of a correct
    answer by its formatting (the reward hack PURE, arXiv 2504.15275, reports on
    "\n\n"). Text with no content is one step.
    """
    if not separator:
        raise ValueError("the step separator must be a non-empty string.")
    spans: list[tuple[int, int]] = []
    pos = 0
    while pos < len(text):
        hit = text.find(separator, pos)
        b = len(text) if hit < 0 else hit + len(separator)
        if (spans and not has_content(text[pos:b])) or (
            spans and not has_content(text[spans[-1][0] : spans[-1][1]])
        ):
            spans[-1] = (spans[-1][0], b)
        else:
            spans.append((pos, b))
        pos = b
    return spans or [(0, len(text))]


def _turn_spans(traj: Trajectory) -> list[tuple[int, int]]:
    """(first, last) policy-token index of each turn, from `turn_ends` and `loss_mask`."""
    spans = []
    prev = -1
    for end in traj.turn_ends:
        start = next((p for p in range(prev + 1, end + 1) if traj.loss_mask[p]), end)
        spans.append((start, end))
        prev = end
    return spans


class _DecodedLength:
    """How many characters the first k + 1 tokens decode to, looked up by bisection.

    The decoded length grows with the prefix (a multi-byte character split
    across tokens can wobble it by a character at that token only), so the
    token that completes a step's text is found with O(log n) decodes per step
    rather than decoding every prefix (O(n²) characters for an n-token answer).
    """

    def __init__(self, ids: list[int], decode: Callable[[list[int]], str]):
        self.ids, self.decode = ids, decode
        self._cache: dict[int, int] = {}

    def __call__(self, k: int) -> int:
        if k not in self._cache:
            self._cache[k] = len(self.decode(self.ids[: k + 1]))
        return self._cache[k]

    def first_reaching(self, chars: int) -> int:
        """The first token k whose prefix decodes to at least `chars` characters (the last token if none)."""
        lo, hi = 0, len(self.ids) - 1
        if self(hi) < chars:
            return hi
        while lo < hi:
            mid = (lo + hi) // 2
            if self(mid) >= chars:
                hi = mid
            else:
                lo = mid + 1
        return lo


def split_steps(
    traj: Trajectory, separator: str = DEFAULT_SEPARATOR, decode: Callable[[list[int]], str] | None = None
) -> list[Step]:
    """The steps of `traj` (see the module docstring).

    `decode` (the policy tokenizer's decode) is needed to map the segments of a
    single-turn answer to tokens; without it, or without token ids, steps carry
    text only, except that whole turns still get their spans from `turn_ends`.
    """
    turns = assistant_turns(traj.messages)
    texts = [traj.messages[i].get("content", "") or "" for i in turns]
    has_tokens = bool(traj.token_ids) and len(traj.turn_ends) == len(texts)
    spans = _turn_spans(traj) if has_tokens else [(-1, -1)] * len(texts)
    if len(texts) != 1:
        return [Step(turn=k, text=t, start=a, end=b) for k, (t, (a, b)) in enumerate(zip(texts, spans))]
    text = texts[0]
    chars = split_text(text, separator)
    start, end = spans[0]
    if not has_tokens or decode is None or len(chars) == 1:
        if len(chars) > 1:
            return [Step(turn=0, text=text[a:b]) for a, b in chars]
        return [Step(turn=0, text=text, start=start, end=end)]
    ids = traj.token_ids[start : end + 1]
    covered = _DecodedLength(ids, decode)
    steps: list[Step] = []
    first = start
    for j, (a, b) in enumerate(chars):
        if j == len(chars) - 1:
            last = end  # the last step owns the rest, end-of-turn token included
        else:
            k = covered.first_reaching(b)
            last = start + k
        if last < first:  # a token spanning two separators: merge into the previous step
            prev = steps.pop()
            steps.append(Step(turn=0, text=prev.text + text[a:b], start=prev.start, end=max(prev.end, last)))
            continue
        steps.append(Step(turn=0, text=text[a:b], start=first, end=last))
        first = last + 1
    return steps


def step_prefix(traj: Trajectory, steps: Sequence[Step], j: int) -> list[Message]:
    """The conversation up to and including step j: what a PRM scores for that step.

    Earlier messages are kept as they are; the assistant message of step j's
    turn holds only the text of that turn's steps up to j.
    """
    turns = assistant_turns(traj.messages)
    step = steps[j]
    msg_index = turns[step.turn]
    text = "".join(s.text for s in steps[: j + 1] if s.turn == step.turn)
    return [m.copy() for m in traj.messages[:msg_index]] + [Message(role="assistant", content=text)]


def render_text(messages: Sequence[Message]) -> str:
    """Plain text of a conversation for a reward model: one ``role: content`` block per message."""
    return "\n".join(f"{m.get('role', '?')}: {m.get('content', '') or ''}" for m in messages)
