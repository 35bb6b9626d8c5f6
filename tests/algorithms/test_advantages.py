"""Advantage estimators: hand-computed GRPO values and the registry."""

from __future__ import annotations

import math

import pytest
import torch

from argym.algorithms.advantages import (
    ADVANTAGES,
    AdvantageInputs,
    get_advantage,
    group_moments,
    group_normalized,
)
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
    torch.testing.assert_close(
        group_normalized(rewards, groups, use_std=False), torch.tensor([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0])
    )


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
    adv = get_advantage("grpo")(AdvantageInputs(rewards, groups), LearnerConfig(adv_std=False))
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5]))
    with pytest.raises(ConfigError, match="Did you mean: grpo"):
        get_advantage("grop")


# --------------------------------------------------------------------------- the other estimators

from argym.algorithms.advantages import (  # noqa: E402
    discounted_returns,
    gae,
    length_adaptive_lambda,
    masked_whiten,
)
from argym.algorithms.batch import make_batch  # noqa: E402
from argym.types import Trajectory  # noqa: E402

CFG = LearnerConfig()


def test_all_equal_rewards_give_zero_for_every_group_estimator():
    r, g = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.0]), torch.tensor([0, 0, 0, 1, 1])
    for name in ("grpo", "drgrpo", "rloo"):
        torch.testing.assert_close(get_advantage(name)(AdvantageInputs(r, g), CFG), torch.zeros(5), msg=name)
    batch = make_batch(
        [_traj([1], [1, 1], float(x), group=int(k)) for x, k in zip(r, g)], torch.zeros(5), pad_id=0
    )
    torch.testing.assert_close(
        get_advantage("reinforce++_baseline")(AdvantageInputs.of(batch), CFG), torch.zeros(5, 2)
    )
    # REINFORCE++ takes no baseline: each token's return is the outcome (whitened later, by the learner)
    torch.testing.assert_close(
        get_advantage("reinforce++")(AdvantageInputs.of(batch), CFG), r[:, None].expand(5, 2)
    )


def test_groups_of_size_one_get_zero():
    r, g = torch.tensor([5.0, 2.0]), torch.tensor([0, 1])
    for name in ("grpo", "drgrpo", "rloo"):
        torch.testing.assert_close(get_advantage(name)(AdvantageInputs(r, g), CFG), torch.zeros(2), msg=name)
    batch = make_batch(
        [_traj([1], [1], 5.0, group=0), _traj([1], [1, 1], 2.0, group=1)], torch.zeros(2), pad_id=0
    )
    torch.testing.assert_close(
        get_advantage("reinforce++_baseline")(AdvantageInputs.of(batch), CFG), torch.zeros(2, 2)
    )


def test_drgrpo_ignores_adv_std():
    r, g = torch.tensor([3.0, 1.0, 2.0]), torch.tensor([0, 0, 0])
    torch.testing.assert_close(
        get_advantage("drgrpo")(AdvantageInputs(r, g), LearnerConfig(adv_std=True)),
        torch.tensor([1.0, -1.0, 0.0]),
    )


def test_rloo_hand_computed():
    r, g = torch.tensor([1.0, 0.0, 0.0, 4.0, 2.0]), torch.tensor([0, 0, 0, 1, 1])
    # group 0: 1 − (0+0)/2 = 1; 0 − (1+0)/2 = −0.5 (twice); group 1: 4 − 2 = 2, 2 − 4 = −2
    torch.testing.assert_close(
        get_advantage("rloo")(AdvantageInputs(r, g), CFG), torch.tensor([1.0, -0.5, -0.5, 2.0, -2.0])
    )


def test_reinforce_pp_baseline_is_centred_on_the_group_per_token():
    r, g = [1.0, 0.0, 3.0, 1.0], [0, 0, 1, 1]
    batch = make_batch([_traj([1, 2], [1, 1, 1], x, group=k) for x, k in zip(r, g)], torch.zeros(4), pad_id=0)
    centred = torch.tensor([0.5, -0.5, 1.0, -1.0])  # per-group mean removed, the return of every token
    got = get_advantage("reinforce++_baseline")(AdvantageInputs.of(batch), CFG)
    torch.testing.assert_close(got, centred[:, None] * batch.loss_mask)


def test_masked_whiten_is_over_tokens():
    x = torch.tensor([[1.0, 1.0, 1.0, 9.0], [0.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    # tokens 1, 1, 1, 0: mean 0.75, Bessel std sqrt((3·0.0625 + 0.5625)/3) = 0.5
    want = torch.tensor([[0.5, 0.5, 0.5, 0.0], [-1.5, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(masked_whiten(x, mask, eps=0.0), want)
    assert masked_whiten(x, torch.zeros_like(mask)).abs().sum() == 0  # no token: 0
    assert masked_whiten(torch.tensor([[3.0]]), torch.tensor([[1.0]])).tolist() == [[0.0]]  # one token: 0


def test_discounted_returns_skip_env_tokens():
    # policy, policy, env, env, policy(end turn 2); rewards 1 at t=1 (end of turn 1), 2 at t=4
    rewards = torch.tensor([[0.0, 1.0, 0.0, 0.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0, 1.0]])
    ret = discounted_returns(rewards, mask, gamma=0.5)
    # t=4: 2; t=1: 1 + 0.5·2 = 2 (env tokens are not discounted steps); t=0: 0.5·2 = 1
    torch.testing.assert_close(ret, torch.tensor([[1.0, 2.0, 0.0, 0.0, 2.0]]))
    torch.testing.assert_close(discounted_returns(rewards, mask, 1.0), torch.tensor([[3.0, 3.0, 0, 0, 2.0]]))
    # empty mask: all zeros
    torch.testing.assert_close(discounted_returns(rewards, torch.zeros_like(mask)), torch.zeros_like(mask))


def test_length_adaptive_lambda():
    lam = length_adaptive_lambda(torch.tensor([1.0, 20.0, 40.0, 200.0, 1e9]))
    # 1 − 1/(0.05·l): l=40 → 0.5, l=200 → 0.9; l ≤ 20 → ≤ 0 → clamped to 0; huge → 0.999
    torch.testing.assert_close(lam, torch.tensor([0.0, 0.0, 0.5, 0.9, 0.999]))


def test_gae_hand_computed_and_lambda_one_is_monte_carlo():
    rewards = torch.tensor([[0.0, 0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 9.0, 0.25, 0.75]])  # 9.0 sits on an env token: never used
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]])
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.5)
    # t=3: δ = 1 − 0.75 = 0.25, Â = 0.25; t=2: δ = 0 + 0.75 − 0.25 = 0.5, Â = 0.5 + 0.5·0.25 = 0.625
    # t=0 (next policy token is t=2): δ = 0.25 − 0.5 = −0.25, Â = −0.25 + 0.5·0.625 = 0.0625
    torch.testing.assert_close(adv, torch.tensor([[0.0625, 0.0, 0.625, 0.25]]))
    torch.testing.assert_close(ret, torch.tensor([[0.5625, 0.0, 0.875, 1.0]]))
    _, mc = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(mc, torch.tensor([[1.0, 0.0, 1.0, 1.0]]))  # λ = 1: the MC return
    # per-row λ
    adv2, _ = gae(rewards.repeat(2, 1), values.repeat(2, 1), mask.repeat(2, 1), lam=torch.tensor([0.5, 1.0]))
    torch.testing.assert_close(adv2[0], adv[0])
    torch.testing.assert_close(adv2[1], mc[0] - values[0] * mask[0])


def _traj(prompt, completion_mask, reward, group=0, turn_rewards=(), turn_ends=(), success=False):
    n = len(prompt) + len(completion_mask)
    return Trajectory(
        task_id="t",
        messages=[],
        reward=reward,
        success=success,
        turns=1,
        terminated=True,
        truncated=False,
        token_ids=list(range(1, n + 1)),
        loss_mask=[0] * len(prompt) + list(completion_mask),
        group=group,
        turn_rewards=list(turn_rewards),
        turn_ends=list(turn_ends),
    )


def test_token_rewards_from_turns_and_returns_estimator():
    # multi-turn: prompt(2) | turn 1: 2 policy tokens | env: 2 | turn 2: 1 policy token; the outcome
    # reward 1 arrives with turn 2; turn 1 has a process reward 0.5. A length-1 response in group 1.
    a = _traj([1, 2], [1, 1, 0, 0, 1], 1.5, group=0, turn_rewards=[0.5, 1.0], turn_ends=[3, 6])
    b = _traj([1, 2], [1, 1, 0, 0, 1], 0.5, group=0, turn_rewards=[0.5, 0.0], turn_ends=[3, 6])
    c = _traj([1], [1], 1.0, group=1)
    batch = make_batch([a, b, c], torch.zeros(3), pad_id=0)
    # target-aligned: column p − 1 holds token p (turn ends 3 and 6 → columns 2 and 5)
    assert batch.token_rewards[0].tolist() == [0, 0, 0.5, 0, 0, 1.0]
    assert batch.loss_mask[0].tolist() == [0, 1, 1, 0, 0, 1]
    assert batch.token_rewards[2].tolist() == [1.0, 0, 0, 0, 0, 0]
    fn = get_advantage("returns")
    raw = fn(AdvantageInputs.of(batch), LearnerConfig(adv_baseline=False))
    assert raw[0].tolist() == [0.0, 1.5, 1.5, 0.0, 0.0, 1.0]
    assert raw[2].tolist() == [1.0, 0, 0, 0, 0, 0]
    base = fn(AdvantageInputs.of(batch), LearnerConfig())
    # group 0's mean first-token return (1.5 + 0.5)/2 = 1 is subtracted; group 1 has one sample: no baseline
    assert base[0].tolist() == [0.0, 0.5, 0.5, 0.0, 0.0, 0.0]
    assert base[1].tolist() == [0.0, -0.5, -0.5, 0.0, 0.0, -1.0]  # returns 0.5, 0.5, 0
    assert base[2].tolist() == [1.0, 0, 0, 0, 0, 0]


def test_gae_estimator_needs_values():
    batch = make_batch([_traj([1], [1, 1], 1.0)], torch.zeros(1), pad_id=0)
    with pytest.raises(ConfigError, match="value model"):
        get_advantage("gae")(AdvantageInputs.of(batch), LearnerConfig())
    batch.values = torch.zeros_like(batch.loss_mask)
    adv = get_advantage("gae")(AdvantageInputs.of(batch), LearnerConfig(lam_alpha=0.0, lam_policy=1.0))
    assert adv.tolist() == [[1.0, 1.0]]


def test_every_estimator_has_one_signature_and_says_what_it_needs_in_its_entry():
    """What an estimator is (token level, whitened, needs a value model) is its registry entry's, not
    attributes bolted on the function; every one takes `(AdvantageInputs, config)`."""
    from argym.algorithms.advantages import gae_advantage, returns_advantage

    assert [n for n in ADVANTAGES.names() if ADVANTAGES.get(n).needs_values] == ["gae"]
    assert {n for n in ADVANTAGES.names() if ADVANTAGES.get(n).whiten_tokens} == {
        "reinforce++",
        "reinforce++_baseline",
    }
    assert not ADVANTAGES.get("grpo").token_level and ADVANTAGES.get("returns").token_level
    assert not hasattr(gae_advantage, "token_level") and not hasattr(returns_advantage, "token_level")
    r, g = torch.tensor([1.0, 0.0]), torch.tensor([0, 0])
    batch = make_batch([_traj([1], [1], x, group=0) for x in (1.0, 0.0)], torch.zeros(2), pad_id=0)
    for name in ADVANTAGES.names():
        inputs = AdvantageInputs.of(batch) if ADVANTAGES.get(name).token_level else AdvantageInputs(r, g)
        if ADVANTAGES.get(name).needs_values:
            inputs.values = torch.zeros_like(batch.loss_mask)
        assert get_advantage(name)(inputs, CFG).shape[0] == 2, name
