"""The learner's advantages: the configured estimator over the rewards of every process.

A sequence-level estimator sees all processes' rewards (its batch statistics must
be global, so sharding a batch changes nothing); a token-level one sees this
process's tokens, whitened over all processes' when it asks to (REINFORCE++).
`has_signal` says, over all processes, whether a mini-batch's step has any evidence behind it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from argym.algorithms.advantages import AdvantageInputs, Estimator, level_flat_groups, masked_whiten
from argym.algorithms.batch import TrainBatch
from argym.algorithms.registry import ADVANTAGES, KL_ESTIMATORS

if TYPE_CHECKING:
    from accelerate import Accelerator

    from argym.algorithms.learner_config import LearnerConfig


def compute_advantages(batch: TrainBatch, config: LearnerConfig, accelerator: Accelerator) -> Tensor:
    """The configured estimator on `batch` (after infra failures were dropped); (B, L-1).

    Flat groups are levelled first (`level_flat_groups`: rewards equal up to float32 rounding are made
    equal). With ``kl_in_reward`` the reward is then lowered by β Σ_t KL_t of the sampled response
    (π_old against π_ref), as RLOO and REINFORCE++ do.
    """
    cfg, mask = config, batch.loss_mask
    advantage_fn: Estimator = ADVANTAGES.get(cfg.advantage)
    outcome = level_flat_groups(AdvantageInputs.of(batch))
    rewards, token_rewards = outcome.rewards, outcome.token_rewards
    if cfg.kl_in_reward and cfg.kl_coef > 0:
        kl = KL_ESTIMATORS.get(cfg.kl_estimator)(batch.old_logprobs, batch.ref_logprobs) * mask  # (B, L-1)
        rewards = rewards - cfg.kl_coef * kl.sum(-1)  # sequence-level, as TRL's RLOOTrainer
        token_rewards = token_rewards - cfg.kl_coef * kl  # per token, as REINFORCE++ eq. 5
    if advantage_fn.token_level:
        # the outcome baseline of REINFORCE++-baseline reads the rewards before the KL (in token_rewards)
        adv = advantage_fn(replace(outcome, token_rewards=token_rewards), cfg)
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


def live_rows(mini: TrainBatch, config: LearnerConfig) -> Tensor:
    """Which rows of `mini` can move the policy, (b,) bool: a policy token with an advantage ≠ 0, or VAPO's
    NLL on a successful sample; every row when a loss term does not vanish with the advantages (the KL to
    π_ref in the loss, the entropy bonus). Flat groups have advantage 0 (`level_flat_groups`), and every
    registered policy loss is 0 with its advantage, so a flat group's rows are not live."""
    cfg = config
    if (cfg.kl_coef > 0 and not cfg.kl_in_reward) or cfg.entropy_coef > 0:
        return torch.ones(len(mini), dtype=torch.bool)
    policy = mini.loss_mask > 0  # (b, l-1)
    live = (mini.advantages != 0) & policy
    if cfg.nll_coef > 0 and mini.positive is not None:
        live |= policy & mini.positive[:, None]
    return live.any(dim=1)


def has_signal(mini: TrainBatch, config: LearnerConfig, accelerator: Accelerator) -> bool:
    """Whether a mini-batch gives the policy anything to learn on any process: a `live_rows` row on one."""
    count = torch.tensor([float(live_rows(mini, config).sum())], device=accelerator.device)
    return bool(accelerator.reduce(count, reduction="sum").item() > 0)


def rows_to_run(mini: TrainBatch, config: LearnerConfig, accelerator: Accelerator, sharded: bool) -> Tensor:
    """The rows of `mini` whose training forward and backward run, (b,) bool: every row, unless
    `skip_zero_advantage_rows` (and not `sharded`: FSDP's processes must run the same forwards); then the
    `live_rows`, none on any process when no process has one. A process without a live row while another
    has some runs its first row all the same: DDP reduces the gradients in every process's last backward,
    and a zero-advantage row adds 0 to them."""
    if not config.skip_zero_advantage_rows or sharded:
        return torch.ones(len(mini), dtype=torch.bool)
    live = live_rows(mini, config)
    count = torch.tensor([float(live.sum())], device=accelerator.device)
    if accelerator.reduce(count, reduction="sum").item() > 0 and not live.any() and len(live):
        live[0] = True
    return live
