"""Advantage estimators: hand-computed GRPO values and the registry."""

from __future__ import annotations

import math

import pytest
import torch

from argym.algorithms.advantages import ADVANTAGES, get_advantage, group_moments, group_normalized
from argym.algorithms.learner import LearnerConfig
from argym.errors import ConfigError


def test_grpo_hand_computed():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    # group 0: mean 0.5, Bessel std sqrt((4 · 0.25) / 3) = sqrt(1/3)
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    expected = torch.tensor([a, -a, -a, a, 0.0, 0.0, 0.0, 0.0])
    adv = group_normalized(rewards, groups)
    assert adv.dtype == torch.float32
    torch.testing.assert_close(adv, expected, atol=1e-7, rtol=0)
    # Dr.GRPO: centred only
    torch.testing.assert_close(group_normalized(rewards, groups, use_std=False),
                               torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0]))


def test_group_ids_any_order_and_size_one_groups():
    rewards = torch.tensor([3.0, 1.0, 5.0, 2.0, 7.0])
    groups = torch.tensor([42, 7, 42, 7, 9])  # interleaved, not contiguous; 9 is alone
    adv = group_normalized(rewards, groups, eps=0.0)
    s42 = math.sqrt(2.0)  # Bessel std of {3, 5}: sqrt((1 + 1) / 1)
    s7 = math.sqrt(0.5)  # of {1, 2}: sqrt((0.25 + 0.25) / 1)
    torch.testing.assert_close(adv, torch.tensor([-1 / s42, -0.5 / s7, 1 / s42, 0.5 / s7, 0.0]))


def test_matches_per_group_torch_std():
    g = torch.Generator().manual_seed(0)
    rewards = torch.rand(60, generator=g)
    groups = torch.randint(0, 7, (60,), generator=g)
    adv = group_normalized(rewards, groups)
    for k in groups.unique():
        sel = groups == k
        r = rewards[sel]
        want = (r - r.mean()) / (r.std() + 1e-6) if sel.sum() > 1 else torch.zeros_like(r)
        torch.testing.assert_close(adv[sel], want, atol=1e-5, rtol=1e-5)


def test_group_moments():
    mean, std, count, index = group_moments(torch.tensor([1.0, 3.0, 10.0]), torch.tensor([5, 5, 2]))
    assert count.tolist() == [1.0, 2.0]  # groups sorted by id: 2, 5
    assert mean.tolist() == [10.0, 2.0]
    assert std.tolist() == [0.0, pytest.approx(math.sqrt(2.0))]
    assert index.tolist() == [1, 1, 0]


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape"):
        group_normalized(torch.zeros(3), torch.zeros(4, dtype=torch.long))


def test_registry_lookup_and_config():
    assert "grpo" in ADVANTAGES
    rewards, groups = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    adv = get_advantage("grpo")(rewards, groups, LearnerConfig(adv_std=False))
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5]))
    with pytest.raises(ConfigError, match="Did you mean: grpo"):
        get_advantage("grop")
