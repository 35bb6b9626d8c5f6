"""What a policy is to argym.

Two kinds of agent act in envs:
- a `TokenPolicy` is token-in, token-out; it is what learners train and the
  rollout engine drives (`generate` on a batch of prompt token ids);
- a `MessageAgent` maps a conversation to the next assistant turn (scripted
  oracle and random agents, HTTP endpoints).

A training run samples its rollouts from a `Generator`: a token policy that also
takes the learner's weights after each update, and is closed with the run.
"""

from __future__ import annotations

from collections.abc import Callable
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

    def cut(self, limit: int, decode: Callable[[list[int]], str]) -> Completion:
        """This completion, or its first `limit` tokens with finish reason "length" when it is longer: what
        a request with a smaller budget than the batch it was generated in keeps (`decode` writes its text)."""
        if len(self.token_ids) <= limit:
            return self
        ids = self.token_ids[:limit]
        return Completion(
            token_ids=ids, logprobs=self.logprobs[:limit], finish_reason="length", text=decode(ids)
        )


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


@runtime_checkable
class Generator(TokenPolicy, Protocol):
    """What samples a training run's rollouts: a token policy that takes the learner's weights.

    Three backends, one chosen when the run is built (`argym.algorithms.build.build_generator`):
    - `HFPolicy` (agents/hf.py), transformers in this process: the trained policy itself, whose
      weights the learner updates in place, or in async mode a copy of it, which samples while the
      learner updates the original;
    - `VLLMPolicy` (agents/vllm.py), vLLM's engine in this process;
    - `RayGenerators` (argym/cluster/generators.py), either of those in Ray actors (`cluster.generators`).
    A run samples every rollout through a `VersionedGenerator` (agents/scheduler.py) over the chosen
    one, the same in sync and async mode: it reports the *version* of the weights (how many learner
    updates they hold, recorded on every token sampled) and keeps a weight load between two
    `generate` calls.
    """

    @property
    def weights_dtype(self) -> Any:
        """The dtype loaded weights are rounded to (a bfloat16 vLLM engine), which the learner can then train on
        (algorithms/weight_grid.py); None: they are held as the learner's."""
        ...

    def load_weights(self, model: Any) -> float | None:
        """Take `model`'s current weights (the learner's); the seconds it took, or None when there was nothing
        to load (the generator samples from `model` itself)."""
        ...

    def close(self) -> None:
        """Release what it holds (an engine's processes, Ray actors)."""
        ...


def generate_versioned(
    policy: Any, prompts: list[list[int]], sampling: SamplingParams, seed: int | None = None
) -> tuple[list[Completion], int]:
    """`policy`'s completions and the policy version that sampled them: the one a `VersionedGenerator`
    reports (a training run's generator), else -1 (unknown). What samples outside the rollout engine (R³L's
    reflections, the Decomposer's hints, an agent program's requests) records it on its tokens through this,
    so their staleness is accounted for per token as the engine's is (docs/async.md)."""
    versioned = getattr(policy, "generate_versioned", None)
    if versioned is not None:
        completions, version = versioned(prompts, sampling, seed=seed)
        return list(completions), int(version)
    return list(policy.generate(prompts, sampling, seed=seed)), -1
