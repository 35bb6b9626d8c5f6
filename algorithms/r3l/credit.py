"""R³L's credit rule at learner step 5, and its ratio-free loss (arXiv 2601.03715; see `argym.algorithms.r3l`).

Kept apart from the rollout side so the learner imports it without the rollout engine. R³L's other
answer to its off-policy retries, the truncated importance weight (`tis_cap`), is the learner's
general off-policy correction (algorithms/off_policy.py), which R³L uses as every stale sampler does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from argym.algorithms.losses import register_policy_loss

OPMD_TAU = 1.0  # τ of R³L's OPMD loss (the paper's examples/R3L configs)


def amplify_positive(adv: Tensor, mask: Tensor, success: Tensor, alpha: float) -> Tensor:
    """R³L's positive amplification (arXiv 2601.03715; the code's `OPMDReweightAdvGroupAdvantage`).

    Â := 1 on successful samples; Â := α·Â where Â ≥ 0 otherwise; Â < 0 unchanged.
    `adv` and `mask` are (B, T), `success` (B,) bool; returns (B, T), 0 off the mask.
    """
    succ = success.to(torch.bool)[:, None].expand_as(adv)  # (B, T)
    out = torch.where(succ, torch.ones_like(adv), torch.where(adv >= 0, alpha * adv, adv))
    return out * mask


@register_policy_loss("opmd")
def opmd_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: Any
) -> tuple[Tensor, Tensor]:
    """R³L's ratio-free OPMD loss: L = −Â·log π_θ / (1 + τ), τ = 1 (no ratio, no clip); (B, T)."""
    return -adv * logp / (1.0 + OPMD_TAU), torch.zeros_like(logp, dtype=torch.bool)


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
