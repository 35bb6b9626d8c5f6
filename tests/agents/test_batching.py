"""The one request batcher: waiting requests share a generate call per temperature and top-p, each answer cut to its
own limit; a request its caller gave up on is answered with the caller's error; closing answers the rest."""

from __future__ import annotations

import threading

import pytest

from argym.agents.batching import RequestBatcher
from argym.agents.policy import Completion, SamplingParams


class Counting:
    """A generator that writes `max_new_tokens` tokens per prompt (ids 1, 2, ...) and logs its calls."""

    def __init__(self):
        self.calls: list[tuple[int, SamplingParams, int]] = []
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, prompts, sampling, seed):
        self.entered.set()
        self.release.wait(timeout=10)
        self.calls.append((len(prompts), sampling, seed))
        n = sampling.max_new_tokens
        return [Completion(list(range(1, n + 1)), [-0.5] * n, "length", "x" * n) for _ in prompts], 7


def test_waiting_requests_share_one_call_and_keep_their_own_limits():
    generate = Counting()
    batcher = RequestBatcher(generate, lambda ids: "x" * len(ids), first_seed=100)
    try:
        first = batcher.submit([0], SamplingParams(max_new_tokens=1))
        assert generate.entered.wait(timeout=10)  # the first call blocks: the others wait together behind it
        asks = [
            batcher.submit([1], SamplingParams(max_new_tokens=5)),
            batcher.submit([2], SamplingParams(max_new_tokens=2), n=2),
            batcher.submit([3], SamplingParams(temperature=0.5, max_new_tokens=3)),
            batcher.submit([4], SamplingParams(max_new_tokens=4), cancelled=lambda: KeyError("gone")),
        ]
        generate.release.set()
        first.result(timeout=10)
        (five,), (two_a, two_b), (three,) = (asks[k].result(timeout=10)[0] for k in range(3))
        with pytest.raises(KeyError, match="gone"):
            asks[3].result(timeout=10)
    finally:
        batcher.close(RuntimeError("closed"))
    # after the first call: one for temperature 1 (3 prompts, the largest limit), one for 0.5; seeds count calls
    assert [(n, s.temperature, s.max_new_tokens, seed) for n, s, seed in generate.calls] == [
        (1, 1.0, 1, 101),
        (3, 1.0, 5, 102),
        (1, 0.5, 3, 103),
    ]
    assert five.token_ids == [1, 2, 3, 4, 5] and three.token_ids == [1, 2, 3]
    assert (
        two_a.token_ids == two_b.token_ids == [1, 2]
        and two_a.finish_reason == "length"
        and two_a.text == "xx"
    )
    assert asks[0].result()[1] == 7  # the version that sampled
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit([5], SamplingParams()).result(timeout=10)
