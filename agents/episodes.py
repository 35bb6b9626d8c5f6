"""What an agent program's requests sampled, kept token-exact, and turned into trajectories.

A program talks to the policy through Chat Completions requests (`agents/endpoint.py`):
it sends whole conversations, and argym must still train on the exact ids the
policy was fed and sampled, never on a re-tokenisation of the text it returned.
`EpisodeRecord` keeps, per episode, *segments*: token contexts that grew one
completion at a time.

A request continues a segment when the segment's conversation (the messages it
was rendered from, ending with the assistant message the endpoint returned) is
a prefix of the request's messages, with the same tools. Its prompt is then the
segment's ids, the policy's sampled ids kept as they were, plus only the new
messages rendered after them (`ChatRenderer.continuation_ids`, mask 0), exactly
as the rollout engine appends env replies. Any other request (the program
edited, dropped or reordered earlier messages, or re-sent a request whose
continuation was already sampled, as with ``n > 1``) starts a new segment,
rendered from scratch. Every segment is exact on its own: its ids are what the
generator was fed and what it returned. docs/agent_programs.md says how the
segments are credited.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from argym.agents.policy import Completion
from argym.agents.renderer import ChatRenderer
from argym.types import Message, Trajectory


def normalize_message(raw: Any, where: str = "message") -> Message:
    """A request's message as argym renders it: role, text content and, where given, OpenAI tool calls.

    Content given as OpenAI's list of parts is joined from its text parts. Raises
    ValueError saying what was wrong (the endpoint answers it with a 400).
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object with 'role' and 'content', got {type(raw).__name__}.")
    role = raw.get("role")
    if role not in ("system", "developer", "user", "assistant", "tool"):
        raise ValueError(f"{where}: 'role' must be system, user, assistant or tool, got {role!r}.")
    content = raw.get("content")
    if isinstance(content, list):
        content = "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    if content is not None and not isinstance(content, str):
        raise ValueError(
            f"{where}: 'content' must be a string or a list of text parts, got {type(content).__name__}."
        )
    out: Message = {"role": "system" if role == "developer" else role, "content": content or ""}
    if role == "assistant" and raw.get("tool_calls"):
        calls = raw["tool_calls"]
        if not isinstance(calls, list):
            raise ValueError(f"{where}: 'tool_calls' must be a list.")
        out["tool_calls"] = [_normalize_call(c, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)]
    for key in ("tool_call_id", "name"):
        if isinstance(raw.get(key), str):
            out[key] = raw[key]
    return out


def _normalize_call(raw: Any, where: str) -> dict[str, Any]:
    fn = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ValueError(
            f"{where} must be {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}."
        )
    args = fn.get("arguments", "{}")
    if not isinstance(args, str):
        args = json.dumps(args)
    return {
        "id": str(raw.get("id") or ""),
        "type": "function",
        "function": {"name": fn["name"], "arguments": args},
    }


def _key(m: Message) -> tuple[Any, ...]:
    """What makes two messages the same turn (argument JSON compared as values, not as text)."""
    calls = []
    for c in m.get("tool_calls") or []:
        try:
            args = json.dumps(json.loads(c["function"]["arguments"]), sort_keys=True)
        except ValueError:
            args = c["function"]["arguments"]
        calls.append((c["id"], c["function"]["name"], args))
    return m.get("role"), m.get("content") or "", tuple(calls), m.get("tool_call_id", "")


@dataclass
class Segment:
    """One exact token context: prompt and env text (mask 0) and sampled ids (mask 1), in order."""

    messages: list[Message]
    tools: str
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    """the policy version that sampled each id (-1: context, or unknown)"""
    turn_ends: list[int] = field(default_factory=list)
    finish_reason: str = ""

    def extends_to(self, messages: list[Message], tools: str) -> bool:
        """Whether `messages` continue this segment's conversation (same tools, same earlier turns)."""
        n = len(self.messages)
        return (
            tools == self.tools
            and len(messages) > n
            and all(_key(a) == _key(b) for a, b in zip(self.messages, messages[:n]))
        )


@dataclass
class Prompt:
    """The ids one request is generated from, and the segment it continues (None: a new one)."""

    ids: list[int]
    messages: list[Message]
    tools: str
    parent: Segment | None


class EpisodeRecord:
    """Every completion one episode's requests sampled, as exact segments; thread-safe."""

    def __init__(self, key: str, renderer: ChatRenderer | None):
        self.key = key
        self.renderer = renderer
        self.segments: list[Segment] = []
        self.requests = 0
        self.open = True
        self.context_overflow = False
        self._lock = threading.Lock()

    def prompt(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> Prompt:
        """The ids to generate from for a request: a continuation of a segment where one fits, else fresh."""
        assert self.renderer is not None
        tools_key = json.dumps(tools or [], sort_keys=True)
        with self._lock:
            for seg in reversed(self.segments):  # the most recent continuation first
                if seg.extends_to(messages, tools_key):
                    more = self.renderer.continuation_ids(
                        messages[len(seg.messages) :],
                        tools=tools or None,
                        turn_ended=seg.finish_reason == "stop",
                    )
                    return Prompt(seg.ids + more, messages, tools_key, seg)
        return Prompt(self.renderer.prompt_ids(messages, tools=tools or None), messages, tools_key, None)

    def count_request(self) -> None:
        with self._lock:
            self.requests += 1

    def close(self) -> None:
        """No completion is added from now on (the runner reads the segments)."""
        with self._lock:
            self.open = False

    def record(self, prompt: Prompt, completion: Completion, reply: Message, version: int = -1) -> bool:
        """Add one sampled completion, sampled at policy `version`, (False if the episode closed meanwhile: it is
        not part of it).

        It extends its parent segment if that is still where the prompt left it.
        """
        with self._lock:
            if not self.open:
                return False
            seg = prompt.parent
            if seg is None or len(seg.ids) > len(prompt.ids) or prompt.ids[: len(seg.ids)] != seg.ids:
                # a fresh prompt, or a sibling (n > 1, a retry) of a completion already added: a new segment,
                # whose earlier sampled ids are context here (they are trained in the segment that sampled them)
                seg = Segment(messages=[], tools=prompt.tools)
                self.segments.append(seg)
            rest = prompt.ids[len(seg.ids) :]
            seg.ids = seg.ids + rest + list(completion.token_ids)
            seg.mask = seg.mask + [0] * len(rest) + [1] * len(completion.token_ids)
            seg.logprobs = seg.logprobs + [0.0] * len(rest) + list(completion.logprobs)
            seg.versions = seg.versions + [-1] * len(rest) + [version] * len(completion.token_ids)
            seg.turn_ends = seg.turn_ends + [len(seg.ids) - 1]
            seg.finish_reason = completion.finish_reason
            seg.messages = list(prompt.messages) + [reply]
            return True

    @property
    def completions(self) -> int:
        return sum(len(s.turn_ends) for s in self.segments)

    def trajectories(self, template: Trajectory) -> list[Trajectory]:
        """One trajectory per segment, each with the episode's outcome (`template`'s reward, flags and infos).

        The episode's reward sits on each segment's last sampled token (`turn_rewards`),
        its earlier turns get 0, as in a rollout without per-turn rewards.
        """
        out = []
        for seg in self.segments:
            turns = len(seg.turn_ends)
            out.append(
                Trajectory(
                    task_id=template.task_id,
                    messages=list(seg.messages),
                    reward=template.reward,
                    success=template.success,
                    turns=turns,
                    terminated=template.terminated,
                    truncated=template.truncated,
                    infos=list(template.infos),
                    token_ids=list(seg.ids),
                    loss_mask=list(seg.mask),
                    sampler_logprobs=list(seg.logprobs),
                    policy_versions=list(seg.versions),
                    turn_rewards=[0.0] * (turns - 1) + [template.reward],
                    turn_ends=list(seg.turn_ends),
                    group=template.group,
                    infra_failure=template.infra_failure,
                    finish_reason=template.finish_reason or seg.finish_reason,
                )
            )
        return out
