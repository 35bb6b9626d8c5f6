"""Advantage estimators: turn each trajectory's reward into a learning signal.

An estimator is registered by name (`@register_advantage("grpo")`) and takes
``(rewards (N,), group_ids (N,), config)``; it reads from the config the
fields it needs (`adv_std`, `adv_eps`, ...). A preset picks one by name, e.g.
Dr.GRPO is ``advantage="grpo", adv_std=False`` (arXiv 2503.20783).

Implemented here:
- `group_normalized` — GRPO's outcome advantage (DeepSeekMath, arXiv 2402.03300, §4.1.2):
  Â_i = (r_i − mean(r_group)) / (std(r_group) + eps), broadcast to every policy token.

Group statistics are computed with scatter ops (`index_add_`) over the groups,
never with a Python loop over samples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

from argym.algorithms.registry import Registry

if TYPE_CHECKING:
    from argym.algorithms.learner import LearnerConfig


class AdvantageFn(Protocol):
    """A registered advantage estimator: outcome rewards in, one advantage per sample out."""

    def __call__(self, rewards: Tensor, group_ids: Tensor, config: LearnerConfig) -> Tensor: ...


ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator")
register_advantage = ADVANTAGES.register
get_advantage = ADVANTAGES.get


def group_moments(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-group mean, Bessel-corrected std and size, plus each sample's group index.

    Returns ``(mean (G,), std (G,), count (G,), index (N,))``, where `index[i]`
    is the row of sample i's group in the (G,) tensors. Groups are the distinct
    values of `group_ids` (any integers, in any order). The std of a group of
    size 1 is reported as 0. Computed in float64 so hand-checked values match.
    """
    if rewards.dim() != 1 or rewards.shape != group_ids.shape:
        raise ValueError(f"rewards and group_ids must both have shape (N,), got "
                         f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}.")
    r = rewards.to(torch.float64)
    _, index = torch.unique(group_ids, return_inverse=True)  # (N,) values in [0, G)
    num_groups = int(index.max().item()) + 1 if index.numel() else 0
    zeros = torch.zeros(num_groups, dtype=torch.float64, device=r.device)
    count = zeros.index_add(0, index, torch.ones_like(r))  # (G,)
    mean = zeros.index_add(0, index, r) / count  # (G,)
    sq_dev = (r - mean[index]) ** 2  # (N,)
    # torch.std's Bessel correction (n − 1), as verl's compute_grpo_outcome_advantage.
    var = zeros.index_add(0, index, sq_dev) / (count - 1).clamp(min=1)  # (G,)
    return mean, var.sqrt(), count, index


def group_normalized(rewards: Tensor, group_ids: Tensor, use_std: bool = True,
                     eps: float = 1e-6) -> Tensor:
    """GRPO's group-normalised outcome advantage, one value per sample (N,).

    Â_i = (r_i − mean_g r) / (std_g r + eps)  (arXiv 2402.03300, §4.1.2; eps 1e-6 as verl),
    or Â_i = r_i − mean_g r with ``use_std=False`` (Dr.GRPO, arXiv 2503.20783, §3.1).

    The std is Bessel-corrected (n − 1), like `torch.std` in verl and TRL.

    A group of size 1 gets advantage 0. verl instead sets mean 0 and std 1 so
    that Â = r; argym does not, because a lone sample has no baseline: its raw
    reward is on a different scale from its normalised neighbours and would
    push up whatever it sampled whenever rewards are positive.

    >>> group_normalized(torch.tensor([1., 0., 0., 1., 1., 1.]), torch.tensor([0, 0, 0, 0, 1, 1]))
    tensor([ 0.8660, -0.8660, -0.8660,  0.8660,  0.0000,  0.0000])
    """
    mean, std, count, index = group_moments(rewards, group_ids)
    adv = rewards.to(torch.float64) - mean[index]  # (N,)
    if use_std:
        adv = adv / (std[index] + eps)  # arXiv 2402.03300 §4.1.2
    adv = torch.where(count[index] > 1, adv, torch.zeros_like(adv))  # lone samples: no baseline
    return adv.to(rewards.dtype if rewards.is_floating_point() else torch.float32)


@register_advantage("grpo")
def grpo_advantage(rewards: Tensor, group_ids: Tensor, config: LearnerConfig) -> Tensor:
    """GRPO (and, with ``adv_std=False``, Dr.GRPO) outcome advantages from the config."""
    return group_normalized(rewards, group_ids, use_std=config.adv_std, eps=config.adv_eps)
