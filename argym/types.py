"""Core data types shared by envs, agents, learners and leaderboards.

They are plain containers with no behaviour beyond (de)serialisation, so that
every part of argym can import them without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

Role = Literal["system", "user", "assistant", "tool"]


class Message(TypedDict, total=False):
    """One OpenAI-style chat message.

    Example: ``{"role": "user", "content": "What is 2 + 3?"}``. Assistant
    messages may carry ``tool_calls``; tool messages ``tool_call_id`` and ``name``.
    """

    role: Role
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str
    name: str


@dataclass(frozen=True)
class Task:
    """One problem an env can pose.

    `prompt` is the conversation the agent sees first. The remaining fields are
    what the env's grader needs; `meta` holds source-specific extras (e.g. the
    generator's difficulty) and is never shown to the agent.
    """

    id: str
    prompt: tuple[Message, ...]
    split: str = "train"
    answer: str | None = None
    tests: str | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        d = dict(d)
        d["prompt"] = tuple(d["prompt"])
        if d.get("tools") is not None:
            d["tools"] = tuple(d["tools"])
        return cls(**d)


@dataclass
class Trajectory:
    """One finished episode as the rollout engine returns it.

    Token fields are empty for agents that act on messages (oracle, HTTP).
    Invariants (docs/design.md, Agents and rollouts):
    - `token_ids` is the exact context: prompt, the policy's generated ids
      (never re-tokenized) and the rendered env replies, in order;
    - `loss_mask[t]` is 1 on policy tokens (each turn's end-of-turn token
      included) and 0 on prompt, env and tool tokens;
    - `turn_rewards[k]` belongs to the token at `turn_ends[k]`, the last
      policy token of turn k;
    - `sampler_logprobs[t]` is the sampler's log-prob on policy tokens, 0 elsewhere;
    - `policy_versions[t]` is the policy version (learner updates applied to the
      sampler's weights) that sampled token t, -1 on prompt, env and tool tokens;
      with asynchronous rollouts one episode's turns may carry several versions.
      Empty where the producer does not know it (agent programs, older runs).
    """

    task_id: str
    messages: list[Message]
    reward: float
    success: bool
    turns: int
    terminated: bool
    truncated: bool
    infos: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    sampler_logprobs: list[float] = field(default_factory=list)
    policy_versions: list[int] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    group: int = 0
    infra_failure: bool = False
    finish_reason: str = ""
    snapshots: list[Any] = field(default_factory=list)
    """`EnvState` before each turn, only when the rollout engine was asked to record them (R³L)."""

    @property
    def num_policy_tokens(self) -> int:
        """Lengths used by learners count policy tokens only."""
        return int(sum(self.loss_mask))

    @property
    def prompt_length(self) -> int:
        """Number of tokens before the first policy token."""
        for i, m in enumerate(self.loss_mask):
            if m:
                return i
        return len(self.loss_mask)
