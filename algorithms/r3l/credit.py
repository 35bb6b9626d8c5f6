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
    """Learner step 5 on a prepared batch, in place: positive amplification (`amplify_alpha`).

    The step's other half, the truncated IS weight, acts later, in the loss
    (`importance_weighted`, per micro-batch), so amplification always comes first:
    it *sets* a success's advantage to 1, and weighting first would have that
    overwrite erase the off-policy correction exactly on the successful retries,
    the samples furthest from π_old (R³L, arXiv 2601.03715). Pivot masks are
    already in the loss masks (`mask_before`, `distill`).
    """
    if getattr(config, "amplify_alpha", None) is not None:
        batch.advantages = amplify_positive(
            batch.advantages, batch.loss_mask, batch.positive, config.amplify_alpha
        )


def importance_weighted(batch: Any, config: Any) -> Tensor:
    """The advantages the loss takes: × min(π_old/μ, C) per token with `tis_cap: C`, else unchanged.

    The weight corrects each token for having been sampled from μ (truncated IS as
    V-trace's ρ̄, arXiv 1802.01561 eq. 1). It is applied to each micro-batch right
    before its loss, where π_old exists on every path (a separate no-grad pass, or
    the training forward itself when fully on-policy), and never stored: the
    batch's advantages, and what the step logs of them, stay the estimator's.
    """
    adv: Tensor = batch.advantages
    if getattr(config, "tis_cap", None) is None:
        return adv
    w = truncated_is_weight(
        batch.old_logprobs,
        batch.sampler_logprobs,
        batch.loss_mask,
        batch.has_sampler_logprobs,
        config.tis_cap,
    )
    return adv * w
