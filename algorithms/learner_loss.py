"""One micro-batch's loss from its training forward, and the metric sums it adds.

The loss is the clipped policy-gradient term, plus the KL to the reference when it sits in the loss, minus
the entropy bonus, plus VAPO's NLL term, each aggregated over the *whole* mini-batch's token and sequence
counts on all processes (`Normaliser`), so the micro-batches' losses sum to the mini-batch's and the
gradient does not depend on how the rows were split (docs/design.md, Learners). `Learner.backward` owns
the loop: the forward, π_old when it is that forward, and the backward of what `micro_batch_loss` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from argym.algorithms.batch import TrainBatch
from argym.algorithms.losses import PolicyLossFn, aggregate, nll_loss
from argym.algorithms.off_policy import importance_weighted

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelerate import Accelerator

    from argym.algorithms.learner_config import LearnerConfig


@dataclass(frozen=True)
class Normaliser:
    """A mini-batch's counts summed over all its micro-batches and processes: policy tokens, rows, and the
    policy tokens of positive samples (VAPO's NLL; 0 without it)."""

    tokens: float
    seqs: float
    positive_tokens: float

    @classmethod
    def of(cls, mini: TrainBatch, config: LearnerConfig, accelerator: Accelerator) -> Normaliser | None:
        """The global counts of `mini` (one all-reduce); None when no process holds a policy token."""
        positive_tokens = 0.0
        if config.nll_coef > 0:
            assert mini.positive is not None  # make_batch marks every sample's positivity
            positive_tokens = (mini.loss_mask * mini.positive[:, None]).sum().item()
        local = torch.tensor(
            [mini.loss_mask.sum().item(), len(mini), positive_tokens],
            dtype=torch.float64,
            device=accelerator.device,
        )
        tokens, seqs, positive = accelerator.reduce(local, reduction="sum").tolist()
        return cls(tokens, seqs, positive) if tokens > 0 else None

    def aggregate(self, per_token: Tensor, mask: Tensor, config: LearnerConfig) -> Tensor:
        """`per_token` (b, l-1) reduced by the configured `loss_agg` over the global counts."""
        return aggregate(
            per_token,
            mask,
            mode=config.loss_agg,
            global_tokens=self.tokens,
            global_seqs=self.seqs,
            constant=config.loss_agg_constant,
        )


def micro_batch_loss(
    mb: TrainBatch,
    logp: Tensor,
    entropy: Tensor,
    norm: Normaliser,
    config: LearnerConfig,
    policy_loss_fn: PolicyLossFn,
    kl_fn: Callable[[Tensor, Tensor], Tensor],
    sums: dict[str, Tensor],
) -> Tensor:
    """The loss of micro-batch `mb` given its forward's log-probs and entropy (b, l-1), π_old set on `mb`;
    adds the micro-batch's share of `learner_metrics.SUMS` to `sums`."""
    mask = mb.loss_mask  # (b, l-1)
    old = mb.old_logprobs
    assert old is not None  # given, or taken from this forward by the caller
    adv = importance_weighted(mb, config)  # step 5's truncated IS weight, now that π_old exists
    pg, clipped = policy_loss_fn(logp, old, adv, mask, config)
    pg_loss = norm.aggregate(pg, mask, config)
    loss = pg_loss
    if config.kl_coef > 0 and not config.kl_in_reward:
        assert mb.ref_logprobs is not None  # prepare_batch takes π_ref whenever kl_coef > 0
        kl = kl_fn(logp, mb.ref_logprobs)  # (b, l-1)
        kl_loss = norm.aggregate(kl, mask, config)
        loss = loss + config.kl_coef * kl_loss  # GRPO: KL in the loss (arXiv 2402.03300 eq. 3)
        sums["kl_loss"] += kl_loss.detach()
        sums["kl_ref"] += (kl.detach() * mask).sum()
    if config.entropy_coef > 0:
        loss = loss - config.entropy_coef * norm.aggregate(entropy, mask, config)
    if config.nll_coef > 0:  # VAPO: L = L_PPO + μ·L_NLL (arXiv 2504.05118 eq. 9)
        assert mb.positive is not None
        nll = nll_loss(logp, mask, mb.positive, norm.positive_tokens)
        loss = loss + config.nll_coef * nll
        sums["nll"] += nll.detach()
    with torch.no_grad():
        log_ratio = torch.where(mask > 0, logp.detach() - old, 0.0)  # (b, l-1)
        # k3 estimate of KL(π_old‖π_θ), as CleanRL's approx_kl
        sums["approx_kl"] += (torch.exp(log_ratio) - 1 - log_ratio).sum()
        sums["clipped"] += (clipped.float() * mask).sum()
        sums["entropy"] += (entropy.detach() * mask).sum()
        sums["tokens"] += mask.sum()
        sums["loss"] += loss.detach()
        sums["pg_loss"] += pg_loss.detach()
    return loss
