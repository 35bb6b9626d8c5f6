"""Policy loss, KL estimators and aggregation on hand-computed examples."""

from __future__ import annotations

import math

import pytest
import torch

from argym.algorithms.learner import LearnerConfig
from argym.algorithms.losses import (
    AGGREGATIONS,
    aggregate,
    get_kl,
    get_policy_loss,
    kl_k3,
    ppo_clip_loss,
)
from argym.errors import ConfigError

RATIOS = torch.tensor([0.5, 0.9, 1.1, 1.5])


def _loss(ratios, adv, **kw):
    logp = torch.log(ratios).requires_grad_()
    loss, clipped = ppo_clip_loss(logp, torch.zeros_like(logp), adv, **kw)
    loss.sum().backward()
    return loss.detach(), clipped, logp.grad


def test_ppo_clip_positive_advantage():
    loss, clipped, grad = _loss(RATIOS, torch.ones(4))
    # max(−ρ, −clip(ρ, 0.8, 1.2)): only ρ = 1.5 is clipped (to −1.2)
    torch.testing.assert_close(loss, torch.tensor([-0.5, -0.9, -1.1, -1.2]))
    assert clipped.tolist() == [False, False, False, True]
    # d(−ρ)/d logp = −ρ where unclipped; 0 where clipped
    torch.testing.assert_close(grad, torch.tensor([-0.5, -0.9, -1.1, 0.0]))


def test_ppo_clip_negative_advantage():
    loss, clipped, grad = _loss(RATIOS, -2 * torch.ones(4))
    # max(2ρ, 2·clip(ρ)): ρ = 0.5 is clipped up to 0.8
    torch.testing.assert_close(loss, torch.tensor([1.6, 1.8, 2.2, 3.0]))
    assert clipped.tolist() == [True, False, False, False]
    torch.testing.assert_close(grad, torch.tensor([0.0, 1.8, 2.2, 3.0]))


def test_ppo_clip_higher_is_asymmetric():
    loss, clipped, _ = _loss(torch.tensor([1.25, 1.3, 0.79]), torch.ones(3), clip_high=0.28)
    torch.testing.assert_close(loss, torch.tensor([-1.25, -1.28, -0.79]))
    assert clipped.tolist() == [False, True, False]


def test_dual_clip():
    ratios = torch.tensor([5.0, 2.0, 5.0])
    adv = torch.tensor([-1.0, -1.0, 1.0])
    loss, clipped, grad = _loss(ratios, adv, dual_clip=3.0)
    # A<0, ρ=5: max(5, 1.2) = 5 > c·|A| = 3 → 3 (no gradient); ρ=2: 2 stays; A>0: ordinary clip
    torch.testing.assert_close(loss, torch.tensor([3.0, 2.0, -1.2]))
    assert clipped.tolist() == [True, False, True]
    torch.testing.assert_close(grad, torch.tensor([0.0, 2.0, 0.0]))
    loss_no_dual, _, _ = _loss(ratios, adv)
    assert loss_no_dual[0].item() == pytest.approx(5.0)


def test_registered_ppo_clip_reads_config():
    logp = torch.log(torch.tensor([[1.5]]))
    fn = get_policy_loss("ppo_clip")
    loss, _ = fn(
        logp, torch.zeros_like(logp), torch.ones(1, 1), torch.ones(1, 1), LearnerConfig(clip_high=0.4)
    )
    assert loss.item() == pytest.approx(-1.4)


def test_kl_k3_values_and_clamps():
    logp = torch.log(torch.tensor([0.5, 0.3, 1.0, 1e-30]))
    ref = torch.log(torch.tensor([0.25, 0.3, 1e-30, 1.0]))
    kl = kl_k3(logp, ref)
    assert kl[0].item() == pytest.approx(0.5 - math.log(0.5) - 1)  # ρ = π_ref/π = 0.5
    assert kl[1].item() == pytest.approx(0.0)
    # log-ratio −69 → clamped to −20: e^−20 + 20 − 1 = 19 → value clamp 10; +69 → e^20 … → 10
    assert kl[2].item() == pytest.approx(10.0)
    assert kl[3].item() == pytest.approx(10.0)
    assert torch.isfinite(kl).all()


def test_kl_k1_k2():
    logp, ref = torch.tensor([-1.0]), torch.tensor([-3.0])
    assert get_kl("k1")(logp, ref).item() == pytest.approx(2.0)
    assert get_kl("k2")(logp, ref).item() == pytest.approx(2.0)


# L has garbage (100, nan) where the mask is 0: it must not leak in.
L = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 6.0, float("nan"), float("nan")]])
M = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("token-mean", 16 / 5),  # Σ M·L = 6 + 10 over 5 tokens
        ("seq-mean-token-mean", (6 / 3 + 10 / 2) / 2),
        ("seq-mean-token-sum", 16 / 2),
        ("seq-mean-token-sum-norm", 16 / (2 * 4)),  # C = 4
    ],
)
def test_aggregate_hand_computed(mode, expected):
    assert aggregate(L, M, mode, global_tokens=5, global_seqs=2, constant=4.0).item() == pytest.approx(
        expected
    )


def test_aggregate_uses_global_counts():
    # these 2 rows are part of a batch of 4 sequences / 10 tokens
    assert aggregate(L, M, "token-mean", 10, 4).item() == pytest.approx(1.6)
    assert aggregate(L, M, "seq-mean-token-mean", 10, 4).item() == pytest.approx(7 / 4)


@pytest.mark.parametrize("mode", AGGREGATIONS.names())
def test_aggregate_micro_batches_sum_to_full_batch(mode):
    g = torch.Generator().manual_seed(0)
    per_token = torch.randn(7, 9, generator=g)
    mask = (torch.rand(7, 9, generator=g) > 0.4).float()
    mask[:, 0] = 1
    tokens, seqs = mask.sum().item(), 7
    full = aggregate(per_token, mask, mode, tokens, seqs, constant=9.0)
    parts = sum(
        aggregate(per_token[i : i + 3], mask[i : i + 3], mode, tokens, seqs, constant=9.0)
        for i in range(0, 7, 3)
    )
    torch.testing.assert_close(parts, full)


def test_aggregate_errors():
    with pytest.raises(ValueError, match="positive constant"):
        aggregate(L, M, "seq-mean-token-sum-norm", 5, 2)
    with pytest.raises(ConfigError, match="Did you mean: token-mean"):
        aggregate(L, M, "token_mean", 5, 2)
    with pytest.raises(ValueError, match="shape"):
        aggregate(L, M[:, :3], "token-mean", 5, 2)


# --------------------------------------------------------------------------- GSPO, NLL, edge cases

from argym.algorithms.losses import nll_loss, sequence_log_ratio  # noqa: E402


def test_sequence_log_ratio_is_masked_mean():
    logp = torch.log(torch.tensor([[2.0, 8.0, 5.0], [3.0, 1.0, 1.0], [1.0, 1.0, 1.0]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    log_s = sequence_log_ratio(logp, torch.zeros_like(logp), mask)
    # row 0: geometric mean of 2 and 8 = 4; row 1 (length 1): 3; row 2 (empty): 1
    torch.testing.assert_close(log_s.exp(), torch.tensor([[4.0], [3.0], [1.0]]))


def test_gspo_clips_the_sequence_ratio():
    cfg = LearnerConfig(policy_loss="gspo", clip_low=3e-4, clip_high=4e-4)
    logp = torch.log(torch.tensor([[1.1, 1.0], [1.0, 1.0]])).requires_grad_()
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]]) * mask
    loss, clipped = get_policy_loss("gspo")(logp, torch.zeros_like(logp), adv, mask, cfg)
    s0 = math.sqrt(1.1)  # > 1 + 4e-4: clipped, no gradient
    torch.testing.assert_close(loss.detach(), torch.tensor([[-(1 + 4e-4)] * 2, [1.0, 0.0]]))
    assert clipped[0].all() and not clipped[1].any()
    aggregate(loss, mask, "seq-mean-token-mean", 3, 2).backward()
    # row 1: s = exp(logp_0) (length 1), loss = −Â·s, d/dlogp_0 = s = 1 → /2 for the seq mean
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0], [0.5, 0.0]]))
    assert s0 > 1 + 4e-4


def test_gspo_token_equals_gspo_value_and_gradient_with_outcome_advantages():
    g = torch.Generator().manual_seed(0)
    old = torch.randn(3, 5, generator=g) * 0.1
    base = old + torch.randn(3, 5, generator=g) * 0.01
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 0, 0, 0]], dtype=torch.float32)
    adv = torch.tensor([[0.7], [-1.2], [0.3]]).expand(3, 5) * mask
    cfg = LearnerConfig(clip_low=0.2, clip_high=0.2)
    out = {}
    for name in ("gspo", "gspo_token"):
        logp = base.clone().requires_grad_()
        loss, _ = get_policy_loss(name)(logp, old, adv, mask, cfg)
        agg = aggregate(loss, mask, "seq-mean-token-mean", mask.sum(), 3)
        agg.backward()
        out[name] = (agg.detach(), logp.grad)
    torch.testing.assert_close(out["gspo"][0], out["gspo_token"][0])
    torch.testing.assert_close(out["gspo"][1], out["gspo_token"][1])


def test_ppo_on_empty_mask_contributes_nothing():
    logp = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    loss, _ = get_policy_loss("ppo_clip")(
        logp, torch.zeros_like(logp), torch.ones(2, 3) * mask, mask, LearnerConfig()
    )
    agg = aggregate(loss, mask, "token-mean", 1, 2)
    agg.backward()
    assert agg.item() == pytest.approx(-1.0)
    assert logp.grad[0].abs().sum() == 0 and logp.grad[1].tolist() == [-1.0, 0.0, 0.0]


def test_nll_only_on_positive_samples_with_global_count():
    logp = torch.log(torch.tensor([[0.5, 0.25], [0.1, 0.1]])).requires_grad_()
    mask = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    positive = torch.tensor([True, False])
    loss = nll_loss(logp, mask, positive, global_positive_tokens=4)  # e.g. 2 more in another micro-batch
    assert loss.item() == pytest.approx((math.log(2) + math.log(4)) / 4)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-0.25, -0.25], [0.0, 0.0]]))
    none = nll_loss(logp, mask, torch.tensor([False, False]), 0)
    assert none.item() == 0.0 and none.requires_grad
