"""R³L's ratio-free OPMD loss (arXiv 2601.03715; see `argym.algorithms.r3l`).

R³L's credit rule, positive amplification, is learner step 5 (algorithms/credit.py), and its other
answer to its off-policy retries, the truncated importance weight (`tis_cap`), is the learner's
general off-policy correction (algorithms/off_policy.py): R³L uses both as any preset may.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from argym.algorithms.losses import register_policy_loss

OPMD_TAU = 1.0  # τ of R³L's OPMD loss (the paper's examples/R3L configs)


@register_policy_loss("opmd")
def opmd_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: Any
) -> tuple[Tensor, Tensor]:
    """R³L's ratio-free OPMD loss: L = −Â·log π_θ / (1 + τ), τ = 1 (no ratio, no clip); (B, T)."""
    return -adv * logp / (1.0 + OPMD_TAU), torch.zeros_like(logp, dtype=torch.bool)
