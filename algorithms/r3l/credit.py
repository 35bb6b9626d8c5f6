"""R³L's credit rule at learner step 5, and its ratio-free loss (arXiv 2601.03715; see `argym.algorithms.r3l`).

Kept apart from the rollout side so the learner imports it without the rollout engine.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from argym.algorithms.losses import register_policy_loss
from torch import Tensor

OPMD_TAU = 1.0  # τ of R³L's OPMD loss (the paper's examples/R3L configs)


def amplify_positive(adv: Tensor, mask: Tensor, success: Tensor, alpha: float) -> Tensor:
    """R³L's positive amplification (arXiv 2601.03715; the code's `OPMDReweightAdvGroupAdvantage`).

    Â := 1 on successful samples; Â := α·Â where Â ≥ 0 otherwise; Â < 0 unchanged.
    `adv` and `mask` are (B, T), `success` (B,) bool; returns (B, T), 0 off the mask.
    """
    succ = success.to(torch.bool)[:, None].expand_as(adv)  # (B, T)
    out = torch.where(succ, torch.ones_like(adv), torch.where(adv >= 0, alpha * adv, adv))
    return out * mask


def truncated_is_weight(
    old_logp: Tensor, sampler_logp: Tensor, mask: Tensor, has_sampler: Tensor, cap: float
) -> Tensor:
    """min(π_old/μ, C) per token, (B, T); 1 where the sampler's log-prob is unknown or off the mask.

    μ is the distribution the token was sampled from (for a retry, with the
    guidance in context); π_old is the policy on the training context.
    """
    log_w = (old_logp - sampler_logp).clamp(max=math.log(cap))  # (B, T)
    known = has_sampler.to(torch.bool)[:, None] & (mask > 0)  # (B, T)
    return torch.where(known, torch.exp(log_w), torch.ones_like(old_logp))


@register_policy_loss("opmd")
def opmd_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: Any
) -> tuple[Tensor, Tensor]:
    """R³L's ratio-free OPMD loss: L = −Â·log π_θ / (1 + τ), τ = 1 (no ratio, no clip); (B, T)."""
    return -adv * logp / (1.0 + OPMD_TAU), torch.zeros_like(logp, dtype=torch.bool)


def credit_step(batch: Any, config: Any) -> None:
    """Learner step 5 on a prepared batch, in place: positive amplification, then the truncated IS weight.

    In this order because amplification *sets* a success's advantage to 1: weighting
    first would have that overwrite erase the off-policy correction exactly on the
    successful retries, the samples furthest from π_old. Amplification decides how
    much a sample's tokens count, the weight min(π_old/μ, C) then corrects each token
    for having been sampled from μ (R³L, arXiv 2601.03715; truncated IS as V-trace's ρ̄,
    arXiv 1802.01561 eq. 1). Pivot masks are already in the loss masks (`mask_before`, `distill`).
    A batch without π_old yet (fully on-policy: it is the training forward's) gets the weight
    in `Learner.backward`, from that forward.
    """
    if getattr(config, "amplify_alpha", None) is not None:
        batch.advantages = amplify_positive(
            batch.advantages, batch.loss_mask, batch.positive, config.amplify_alpha
        )
    if getattr(config, "tis_cap", None) is not None and batch.old_logprobs is not None:
        w = truncated_is_weight(
            batch.old_logprobs,
            batch.sampler_logprobs,
            batch.loss_mask,
            batch.has_sampler_logprobs,
            config.tis_cap,
        )
        batch.advantages = batch.advantages * w
