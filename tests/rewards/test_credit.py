"""PURE's min-form credit (arXiv 2504.15275) against hand-computed values, and the per-token LOO baseline."""

from __future__ import annotations

import math

import pytest

from argym.rewards.credit import (
    credit_rewards,
    min_form_returns,
    min_form_rewards,
    min_form_weights,
    strict_min_form_rewards,
    sum_form_returns,
    token_loo_baseline,
)


def test_min_form_by_hand():
    r = [0.5, -0.2, 0.8]
    t = 0.1
    e = [math.exp(-x / t) for x in r]  # exp(-5), exp(2), exp(-8)
    w = [x / sum(e) for x in e]
    assert min_form_weights(r, t) == pytest.approx(w)
    assert min_form_rewards(r, t) == pytest.approx([wi * ri for wi, ri in zip(w, r)])
    g = min_form_returns(r, t)
    assert g[2] == pytest.approx(w[2] * 0.8)
    assert g[1] == pytest.approx(w[1] * -0.2 + w[2] * 0.8)
    assert g[0] == pytest.approx(sum(wi * ri for wi, ri in zip(w, r)))


def test_small_temperature_gives_the_min_and_large_the_mean():
    r = [0.9, 0.3, 0.7, 0.95]
    assert min_form_returns(r, temperature=1e-4)[0] == pytest.approx(0.3, abs=1e-9)
    assert min_form_returns(r, temperature=1e4)[0] == pytest.approx(sum(r) / 4, abs=1e-3)


def test_single_step_is_its_own_reward():
    assert min_form_rewards([0.42]) == pytest.approx([0.42])
    assert min_form_returns([-0.3], strict=True) == [-0.3]
    assert min_form_returns([]) == [] and strict_min_form_rewards([]) == []


def test_padding_a_high_step_does_not_raise_the_min_form_return_but_raises_the_sum():
    base, padded = [0.5, 1.0], [0.9, 0.9, 0.9, 0.5, 1.0]
    assert sum_form_returns(padded)[0] > sum_form_returns(base)[0] + 2
    # soft min-form: three fillers move the return by a few hundredths (their weight is e^(-0.4/T) each)
    assert min_form_returns(padded)[0] - min_form_returns(base)[0] < 0.05
    assert min_form_returns(padded, strict=True)[0] == min_form_returns(base, strict=True)[0] == 0.5


def test_strict_min_form_returns_and_rewards():
    r = [0.4, -0.1, 0.7, 0.2]
    assert min_form_returns(r, strict=True) == [-0.1, -0.1, 0.2, 0.2]
    rr = strict_min_form_rewards(r)
    # their reverse cumulative sum is the strict returns
    assert sum_form_returns(rr) == pytest.approx([-0.1, -0.1, 0.2, 0.2])
    assert credit_rewards(r, "strict") == rr and credit_rewards(r, "sum") == r
    with pytest.raises(ValueError, match="credit"):
        credit_rewards(r, "max")
    with pytest.raises(ValueError, match="temperature"):
        min_form_weights(r, 0.0)


def test_sum_form_discount():
    assert sum_form_returns([1.0, 0.0, 2.0], gamma=0.5) == pytest.approx([1.5, 1.0, 2.0])


def test_token_loo_baseline_by_hand():
    rewards = [[1.0, 0.5], [0.0], [2.0, 0.0, 1.0]]
    tokens = [[2, 3], [4], [1, 1, 2]]
    per_token = [1.5 / 5, 0.0 / 4, 3.0 / 4]
    out = token_loo_baseline(rewards, tokens)
    b0 = (per_token[1] + per_token[2]) / 2
    b1 = (per_token[0] + per_token[2]) / 2
    b2 = (per_token[0] + per_token[1]) / 2
    assert out[0] == pytest.approx([1.0 - b0 * 2, 0.5 - b0 * 3])
    assert out[1] == pytest.approx([0.0 - b1 * 4])
    assert out[2] == pytest.approx([2.0 - b2, 0.0 - b2, 1.0 - b2 * 2])
    assert token_loo_baseline([[0.3, 0.1]], [[2, 2]]) == [[0.3, 0.1]]  # a group of one: no other response
    with pytest.raises(ValueError):
        token_loo_baseline([[1.0]], [[1, 2]])


def test_steps_without_an_opinion_take_no_part_in_the_minimum():
    """None (no opinion) credits 0 and leaves the min to the scored steps; its return is the next scored one's."""
    assert credit_rewards([None, None, 1.0], "min") == pytest.approx([0.0, 0.0, 1.0])
    strict = credit_rewards([None, 0.5, None, 1.0], "strict")
    assert strict == [0.0, -0.5, 0.0, 1.0] and sum_form_returns(strict) == [0.5, 0.5, 1.0, 1.0]
    assert sum(credit_rewards([0.8, None, -0.4], "min", 1e-4)) == pytest.approx(-0.4)
    assert credit_rewards([None, 2.0], "sum") == [0.0, 2.0] and credit_rewards([None, None], "min") == [
        0.0,
        0.0,
    ]
