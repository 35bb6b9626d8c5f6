"""argym.stats on hand-computed values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from argym.stats import pass_at_k, success_interval, wilson_interval, z_value


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (c of them correct) that hold a success."""
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(outcomes[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            expected = brute_force_pass_at_k(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
            assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_hand_values():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # k=1 is c/n
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # n - c < k
    # large n: the product form never builds C(1000, 500)
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)
    assert 0.0 <= pass_at_k(10_000, 37, 100) <= 1.0


@pytest.mark.parametrize("args", [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_rejects_bad_arguments(args):
    with pytest.raises(ValueError):
        pass_at_k(*args)


def test_z_value():
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    with pytest.raises(ValueError):
        z_value(1.0)


def test_wilson_known_values():
    # Newcombe (1998), Stat. Med. 17:857, example 81/263: Wilson 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263)
    assert (low, high) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    # 7/10: (0.3968, 0.8922)
    assert wilson_interval(7, 10) == pytest.approx((0.396778, 0.892209), abs=1e-6)
    # the boundaries are exact
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == 1.0
    assert wilson_interval(10, 10)[0] == pytest.approx(0.722467, abs=1e-6)


def test_success_interval_one_sample_per_task_is_wilson():
    successes = [True] * 7 + [False] * 3
    mean, low, high = success_interval(successes, [f"t{i}" for i in range(10)])
    assert mean == pytest.approx(0.7)
    assert (low, high) == pytest.approx(wilson_interval(7, 10))


def test_success_interval_clustered_equal_sizes():
    # 5 tasks x 2 samples; per-task rates 1, .5, .5, 0, .5 -> mean .5,
    # sample variance of the task rates = (.25 + 0 + 0 + .25 + 0) / 4 = .125,
    # SE = sqrt(.125 / 5) = .158114, half-width = 1.959964 * .158114 = .309898.
    successes = [1, 1, 1, 0, 0, 1, 0, 0, 1, 0]
    tasks = list("aabbccddee")
    mean, low, high = success_interval(successes, tasks)
    assert mean == pytest.approx(0.5)
    assert (low, high) == pytest.approx((0.190102, 0.809898), abs=1e-6)


def test_success_interval_clustered_unequal_sizes():
    # a: 1,1,1,0  b: 0,0  c: 1,0  d: 1,0 -> N=10, mean .5; per-task residual sums 1, -1, 0, 0;
    # Var = G/(G-1) * 2 / N^2 = 4/3 * 2/100 = .0266667, SE = .163299, half = .320060.
    successes = [1, 1, 1, 0, 0, 0, 1, 0, 1, 0]
    tasks = ["a"] * 4 + ["b"] * 2 + ["c"] * 2 + ["d"] * 2
    mean, low, high = success_interval(successes, tasks)
    assert mean == pytest.approx(0.5)
    assert (low, high) == pytest.approx((0.179940, 0.820060), abs=1e-6)


def test_success_interval_clips_and_degenerates():
    mean, low, high = success_interval([1, 1, 1, 1, 0, 0], list("aaabbc"))
    assert 0.0 <= low <= mean <= high <= 1.0
    # every task at the same rate: the clustered interval would be a point; Wilson over the tasks instead
    assert success_interval([1] * 6, list("aabbcc")) == pytest.approx((1.0, *wilson_interval(3, 3)))
    # a single task sampled several times: its samples are independent -> Wilson
    assert success_interval([1, 0, 1, 1], ["x"] * 4)[1:] == pytest.approx(wilson_interval(3, 4))


def test_success_interval_rejects_bad_input():
    with pytest.raises(ValueError):
        success_interval([], [])
    with pytest.raises(ValueError):
        success_interval([1, 0], ["a"])
    with pytest.raises(ValueError):
        success_interval([2.0], ["a"])


@pytest.mark.parametrize(
    "outcomes, tasks",
    [
        ([1] * 8, list("aabbccdd")),  # an oracle with 2 samples per task
        ([0] * 6, list("aaabbb")),  # nothing solved
        ([1, 0] * 4, list("aabbccdd")),  # every task at 0.5: zero variance between tasks
    ],
)
def test_a_clustered_interval_never_collapses_to_a_point(outcomes, tasks):
    mean, low, high = success_interval(outcomes, tasks)
    g = len(set(tasks))
    assert high - low > 0.2  # a handful of tasks cannot pin the rate down
    if mean in (0.0, 1.0):
        assert (low, high) == pytest.approx(wilson_interval(int(mean * g), g))
    assert low < mean < high or mean in (low, high)


def test_within_group_correlation_sees_only_differences_inside_groups():
    from argym.stats import within_group_correlation

    # group b's values are all higher, but inside each group the term ranks samples as success does
    xs, ys, gs = [0.1, 0.3, 5.1, 5.3], [0, 1, 0, 1], ["a", "a", "b", "b"]
    assert within_group_correlation(xs, ys, gs) == pytest.approx(1.0)
    assert within_group_correlation(xs, [1, 0, 1, 0], gs) == pytest.approx(-1.0)
    # pooled over the batch the same numbers look unrelated to success (the between-group gap dominates)
    assert abs(float(np.corrcoef(xs, ys)[0, 1])) < 0.1
    assert within_group_correlation(xs, [1, 1, 0, 0], gs) is None  # success never varies inside a group
    with pytest.raises(ValueError, match="equal lengths"):
        within_group_correlation(xs, ys, gs[:3])
