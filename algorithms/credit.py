"""Learner step 5, credit: transforms of a prepared batch's advantages before the loss.

One transform today, positive amplification, introduced by R³L (arXiv 2601.03715) and set by the
learner's `amplify_alpha`; it lives on the learner side because any preset may use it, and the
learner must not depend on R³L's rollout strategy to run its own step order.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def amplify_positive(adv: Tensor, mask: Tensor, success: Tensor, alpha: float) -> Tensor:
    """R³L's positive amplification (arXiv 2601.03715; the code's `OPMDReweightAdvGroupAdvantage`).

    Â := 1 on successful samples; Â := α·Â where Â ≥ 0 otherwise; Â < 0 unchanged.
    `adv` and `mask` are (B, T), `success` (B,) bool; returns (B, T), 0 off the mask.
    """
    succ = success.to(torch.bool)[:, None].expand_as(adv)  # (B, T)
    out = torch.where(succ, torch.ones_like(adv), torch.where(adv >= 0, alpha * adv, adv))
    return out * mask


def credit_step(batch: Any, config: Any) -> None:
    """Learner step 5 on a prepared batch, in place: positive amplification (`amplify_alpha`).

    The step's other half, the truncated IS weight, acts later, in the loss
    (`off_policy.importance_weighted`, per micro-batch), so amplification always comes first:
    it *sets* a success's advantage to 1, and weighting first would have that
    overwrite erase the off-policy correction exactly on the successful retries,
    the samples furthest from π_old (R³L, arXiv 2601.03715). Pivot masks are
    already in the loss masks (`mask_before`, `distill`).
    """
    if getattr(config, "amplify_alpha", None) is not None:
        batch.advantages = amplify_positive(
            batch.advantages, batch.loss_mask, batch.positive, config.amplify_alpha
        )
