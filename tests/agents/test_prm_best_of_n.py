"""PRMBestOfN: with an oracle PRM, best-of-N reaches the oracle's success rate."""

from __future__ import annotations

import random
import re

import pytest

from argym.agents.evaluate import evaluate
from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.prm_best_of_n import PRMBestOfN
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.errors import ConfigError

ENV = "argym/Math-v0"
KWARGS = {"tasks": "arithmetic(digits=2,ops=+-*,terms=2)"}


class NoisyOracle:
    """Answers correctly with probability `p`, else off by one: a proposer whose candidates a PRM must sort."""

    def __init__(self, p: float, seed: int = 0):
        self.p, self.rng = p, random.Random(seed)

    def act(self, messages, env):
        answer = int(env.unwrapped.task.answer)
        return f"\\boxed{{{answer if self.rng.random() < self.p else answer + 1}}}"


def oracle_scorer(conversations):
    """A PRM that knows arithmetic: 1 if the candidate's boxed value is the question's value."""
    out = []
    for conv in conversations:
        expr = re.search(r"What is (.*)\?", conv[0]["content"]).group(1)
        value = eval(expr, {"__builtins__": {}})  # digits and + - * only (the generator's format)
        boxed = re.search(r"\\boxed\{(-?\d+)\}", conv[-1]["content"])
        out.append(float(boxed is not None and int(boxed.group(1)) == value))
    return out


def test_best_of_n_with_an_oracle_prm_reaches_the_oracle_success_rate():
    oracle = evaluate(ENV, KWARGS, "oracle", episodes=40)
    alone = evaluate(ENV, KWARGS, NoisyOracle(0.3, seed=1), episodes=40)
    best = evaluate(ENV, KWARGS, PRMBestOfN(NoisyOracle(0.3, seed=1), oracle_scorer, n=32), episodes=40)
    blind = evaluate(
        ENV, KWARGS, PRMBestOfN(NoisyOracle(0.3, seed=1), lambda cs: [0.0] * len(cs), n=32), episodes=40
    )
    assert oracle.mean == 1.0
    assert alone.mean < 0.6 and blind.mean < 0.6  # a scorer that cannot tell keeps the first candidate
    assert best.mean == oracle.mean


def test_best_of_n_over_a_token_policy_keeps_the_best_scored_sample():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(
        build_tiny_model(
            tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        ),
        tok,
    )
    agent = PRMBestOfN(
        policy,
        lambda cs: [-len(c[-1]["content"]) for c in cs],
        n=6,
        sampling=SamplingParams(temperature=1.0, max_new_tokens=12),
        seed=3,
    )
    chosen = agent.act([{"role": "user", "content": "What is 1 + 2?"}], env=None)
    assert len(agent.last_scores) == 6 and -len(chosen) == max(agent.last_scores)
    with pytest.raises(ConfigError):
        PRMBestOfN(policy, oracle_scorer, n=4, sampling=SamplingParams(temperature=0.0))
    with pytest.raises(ConfigError):
        PRMBestOfN(policy, oracle_scorer, n=0)
