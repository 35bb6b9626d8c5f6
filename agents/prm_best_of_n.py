"""`PRMBestOfN`: at each turn, sample N candidate turns and keep the one a process reward model likes best.

AgentPRM's inference-time use of its PRM (Choudhury 2025, arXiv 2502.10325,
`best_of_n_agent.py`). The agent is a `MessageAgent`: evaluation, the rollout
engine and leaderboards take it like any other. The proposer is a token policy
(its N samples come from one batched `generate` call on the conversation
rendered with its chat template) or any `MessageAgent` (asked N times). The
scorer maps conversations ending with a candidate to scores; `prm_scorer`
wraps a `ClassifierPRM` (its probability of success from that prefix).
Ties keep the earliest candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from argym.agents.policy import SamplingParams, TokenPolicy
from argym.agents.renderer import ChatRenderer
from argym.errors import ConfigError, EnvStateError
from argym.rewards.steps import render_text
from argym.seeding import seed_for
from argym.types import Message

Scorer = Callable[[list[list[Message]]], list[float]]
"""Scores each conversation (state plus one candidate turn); higher is better."""


def prm_scorer(prm: Any) -> Scorer:
    """A scorer from a `ClassifierPRM`: P(success) of each state-action prefix, as the PRM was trained."""
    return lambda conversations: prm.probabilities([render_text(c) for c in conversations])


class PRMBestOfN:
    """Best-of-N action selection by a PRM; `last_scores` keeps the latest candidates' scores (for logging)."""

    name = "prm-best-of-n"

    def __init__(
        self, proposer: Any, scorer: Scorer, n: int = 8, sampling: SamplingParams | None = None, seed: int = 0
    ):
        if n < 1:
            raise ConfigError(f"best-of-N needs n >= 1, got {n}.")
        self.proposer = proposer
        self.scorer = scorer
        self.n = n
        self.sampling = sampling or SamplingParams(temperature=1.0)
        if self.sampling.temperature <= 0 and n > 1:
            raise ConfigError(
                "best-of-N with greedy sampling gives N identical candidates; use a temperature > 0."
            )
        self.seed = seed
        self._calls = 0
        self._renderer = ChatRenderer(proposer.tokenizer) if isinstance(proposer, TokenPolicy) else None
        self.last_scores: list[float] = []

    def candidates(self, messages: list[Message], env: Any) -> list[Any]:
        """N candidate turns for the conversation `messages`."""
        self._calls += 1
        if self._renderer is None:
            return [self.proposer.act(messages, env) for _ in range(self.n)]
        try:
            tools = env.unwrapped.task.tools
        except (AttributeError, EnvStateError):  # no env, or none in an episode
            tools = None
        ids = self._renderer.prompt_ids(messages, tools=tools)
        completions = self.proposer.generate(
            [ids] * self.n, self.sampling, seed=seed_for(self.seed, self._calls, purpose="best_of_n")
        )
        return [c.text for c in completions]

    def act(self, messages: list[Message], env: Any) -> Any:
        cands = self.candidates(messages, env)
        convs = [list(messages) + [_as_message(c)] for c in cands]
        scores = [float(s) for s in self.scorer(convs)]
        if len(scores) != len(cands):
            raise ValueError(f"the scorer gave {len(scores)} scores for {len(cands)} candidates.")
        self.last_scores = scores
        return cands[max(range(len(cands)), key=lambda i: (scores[i], -i))]


def _as_message(action: Any) -> Message:
    if isinstance(action, dict):
        return {"role": "assistant", "content": action.get("content") or ""}
    return {"role": "assistant", "content": str(action)}
