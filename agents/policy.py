"""What a policy is to argym.

Two kinds of agent act in envs:
- a `TokenPolicy` is token-in, token-out; it is what learners train and the
  rollout engine drives (`generate` on a batch of prompt token ids);
- a `MessageAgent` maps a conversation to the next assistant turn (scripted
  oracle and random agents, HTTP endpoints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from argym.types import Message


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings, mapped one to one onto every backend."""

    temperature: float = 1.0
    """Softmax temperature; 0 means greedy."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 64
    """Most tokens one turn may generate."""

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens}


@dataclass
class Completion:
    """One generated turn: the exact ids, their log-probs, and why it stopped.

    `logprobs` mean the same under every backend: log μ(token), μ the distribution
    the token was actually drawn from, i.e. softmax(logits / T) restricted to the
    top-p nucleus (the most probable tokens whose mass first reaches `top_p`) and
    renormalised; greedy (T = 0) reports log softmax(logits) at T = 1. With top_p = 1
    that is the learner's π at the sampling temperature. μ is the denominator of any
    importance weight π_old/μ (R³L's `tis_cap`), which is only unbiased for the
    proposal actually used, and the learner's training–inference mismatch then also
    shows how far top-p sampling is from the policy it trains (docs/design.md).

    `finish_reason` is "stop" when the end-of-turn token was produced (it is
    the last id) and "length" when `max_new_tokens` ran out.
    """

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    text: str


@runtime_checkable
class TokenPolicy(Protocol):
    """A trainable policy: token ids in, token ids out."""

    tokenizer: Any
    """A Hugging Face tokenizer with a chat template (the renderer uses it)."""

    def generate(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        """One completion per prompt; batched, left-padded internally."""
        ...


@runtime_checkable
class MessageAgent(Protocol):
    """An agent that maps the conversation (and its env) to the next turn."""

    def act(self, messages: list[Message], env: Any) -> str | Message:
        """The next assistant turn for `messages`; `env` is the unwrapped env."""
        ...
