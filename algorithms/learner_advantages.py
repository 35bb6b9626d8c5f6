"""The learner's advantages: the configured estimator over the rewards of every process.

A sequence-level estimator sees all processes' rewards (its batch statistics must
be global, so sharding a batch changes nothing); a token-level one sees this
process's tokens, whitened over all processes' when it asks to (REINFORCE++).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from argym.algorithms.advantages import AdvantageInputs, Estimator, masked_whiten
from argym.algorithms.batch import TrainBatch
from argym.algorithms.registry import ADVANTAGES, KL_ESTIMATORS
from torch import Tensor

if TYPE_CHECKING:
    from accelerate import Accelerator
    from argym.algorithms.learner_config import LearnerConfig


def compute_advantages(batch: TrainBatch, config: LearnerConfig, accelerator: Accelerator) -> Tensor:
    """The configured estimator on `batch` (after infra failures were dropped); (B, L-1).

    With ``kl_in_reward`` the reward is first lowered by β Σ_t KL_t of the
    sampled response (π_old against π_ref), as RLOO and REINFORCE++ do.
    """
    cfg, mask = config, batch.loss_mask
    advantage_fn = ADVANTAGES.get(cfg.advantage)
    rewards, token_rewards = batch.rewards, batch.token_rewards
    if cfg.kl_in_reward and cfg.kl_coef > 0:
        kl = KL_ESTIMATORS.get(cfg.kl_estimator)(batch.old_logprobs, batch.ref_logprobs) * mask  # (B, L-1)
        rewards = rewards - cfg.kl_coef * kl.sum(-1)  # sequence-level, as TRL's RLOOTrainer
        token_rewards = token_rewards - cfg.kl_coef * kl  # per token, as REINFORCE++ eq. 5
    if advantage_fn.token_level:
        # the outcome baseline of REINFORCE++-baseline reads the rewards before the KL (in token_rewards)
        inputs = AdvantageInputs(batch.rewards, batch.group_ids, token_rewards, mask, batch.values)
        adv = advantage_fn(inputs, cfg)
        if advantage_fn.whiten_tokens:  # REINFORCE++: over all processes' tokens
            acc = accelerator
            adv = masked_whiten(
                adv,
                mask,
                cfg.adv_eps,
                reduce=lambda t: acc.reduce(t.to(acc.device), reduction="sum").cpu(),
            )
        return adv.float() * mask  # (B, L-1)
    adv = _global_sequence_advantages(
        advantage_fn, rewards, batch.group_ids, cfg, accelerator
    ).float()  # (B,)
    return adv[:, None] * mask  # (B, L-1)


def _global_sequence_advantages(
    advantage_fn: Estimator, rewards: Tensor, group_ids: Tensor, cfg: LearnerConfig, acc: Accelerator
) -> Tensor:
    """The sequence-level estimator over the rewards of *all* processes, this process's rows back.

    Batch-wide statistics of a sequence-level estimator must be global, so one
    process's share of the batch gives the single-process result; group ids are made
    unique per process, since each numbers its groups from 0.
    """
    if acc.num_processes == 1:
        return advantage_fn(AdvantageInputs(rewards, group_ids), cfg)
    n = torch.tensor([len(rewards)], device=rewards.device)
    sizes = acc.gather(n).tolist()  # (P,) rows per process
    width = max(sizes)
    r = acc.gather(acc.pad_across_processes(rewards, dim=0)).view(len(sizes), width)
    g = acc.gather(acc.pad_across_processes(group_ids, dim=0)).view(len(sizes), width)
    span = int(g.max().item()) + 1
    g = g + span * torch.arange(len(sizes), device=g.device)[:, None]  # (P, width), unique per process
    rows = [(k, i) for k, size in enumerate(sizes) for i in range(size)]
    ks, is_ = torch.tensor([k for k, _ in rows]), torch.tensor([i for _, i in rows])
    adv = advantage_fn(
        AdvantageInputs(r[ks, is_], g[ks, is_]), cfg
    )  # over every process's rows, in process order
    start = sum(sizes[: acc.process_index])
    return adv[start : start + len(rewards)]
