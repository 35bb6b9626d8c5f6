"""Advantage estimators: turn each trajectory's reward into a learning signal.

Every estimator has one signature, ``(inputs: AdvantageInputs, config) -> Tensor``,
and is registered by name with what it is (`@register_advantage("gae", token_level=True,
needs_values=True)`): an outcome estimator gives one value per sample (N,), broadcast to
its policy tokens; a token-level one gives (N, T). It reads from the config the fields
it needs (`adv_std`, `adv_eps`, ...). A preset picks one by name, e.g. Dr.GRPO is
``advantage="grpo", adv_std=False`` (arXiv 2503.20783).

Implemented here (outcome estimators):
- "grpo" — GRPO (DeepSeekMath, arXiv 2402.03300, §4.1.2):
  Â_i = (r_i − mean(r_group)) / (std(r_group) + eps); without the std with ``adv_std=False``;
- "drgrpo" — Dr.GRPO's mean-only Â_i = r_i − mean(r_group) (arXiv 2503.20783 eq. 2), whatever `adv_std`;
- "rloo" — leave-one-out Â_i = r_i − (1/(k−1)) Σ_{j≠i} r_j (arXiv 2402.14740 eq. 5);
Token-level estimators (``token_level=True``), (B, T):
- "returns" — discounted returns of per-turn (or process) rewards, G_t = Σ_{s≥t} γ^{s−t} r_s,
  counted over policy tokens only (env tokens are skipped, not discounted), centred on the
  group's mean first-token return when ``adv_baseline`` is set;
- "reinforce++" / "reinforce++_baseline" — REINFORCE++ (arXiv 2501.03262 §3): each token's
  return G_t (with ``kl_in_reward`` the per-token −β·KL_s is in r_s, so a token's return holds
  only the KL of the tokens from it on), the baseline variant with the group's mean outcome
  taken off the last policy token; marked ``whiten_tokens``, so the learner then whitens them
  over every policy token of the batch, on every process (`masked_whiten`).

- "gae" — VAPO's decoupled, length-adaptive GAE (arXiv 2504.05118 §3.2) on the critic's
  values (``needs_values=True``: the trainer builds a value model for it).

Group statistics are computed with scatter ops (`index_add_`) over the groups,
never with a Python loop over samples.

The learner first levels flat groups (`level_flat_groups`): rewards that differ by
float32 rounding only (`FLAT_ULPS`) are made equal, so no estimator turns rounding
into a learning signal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

from argym.algorithms.registry import ADVANTAGES

if TYPE_CHECKING:
    from argym.algorithms.batch import TrainBatch
    from argym.algorithms.learner_config import LearnerConfig


@dataclass
class AdvantageInputs:
    """What an estimator reads: (N,) rewards and group ids; for token-level ones also (N, T) tensors.

    An outcome estimator reads `rewards` and `group_ids` only (the learner gathers
    them over every process, without the token tensors); a `TrainBatch` has every field.
    """

    rewards: Tensor  # (N,)
    group_ids: Tensor  # (N,)
    token_rewards: Tensor | None = None  # (N, T) rewards on their tokens
    loss_mask: Tensor | None = None  # (N, T) 1 on policy tokens
    values: Tensor | None = None  # (N, T) the critic's V (estimators with ``needs_values``)

    @classmethod
    def of(cls, batch: TrainBatch) -> AdvantageInputs:
        return cls(batch.rewards, batch.group_ids, batch.token_rewards, batch.loss_mask, batch.values)

    def tokens(self) -> tuple[Tensor, Tensor]:
        """``(token_rewards, loss_mask)``, which a token-level estimator needs."""
        if self.token_rewards is None or self.loss_mask is None:
            raise ValueError("A token-level advantage estimator needs token_rewards and loss_mask (N, T).")
        return self.token_rewards, self.loss_mask


class AdvantageFn(Protocol):
    """The one estimator signature: inputs and the learner's config in, (N,) or (N, T) advantages out."""

    def __call__(self, inputs: AdvantageInputs, config: LearnerConfig) -> Tensor: ...


@dataclass(frozen=True)
class Estimator:
    """A registered estimator and what it is, read by the learner and the trainer."""

    fn: AdvantageFn
    token_level: bool = False
    """Gives (N, T) advantages (else (N,), one per sample, broadcast to its policy tokens)."""
    whiten_tokens: bool = False
    """The learner whitens the token advantages over every policy token of the batch (REINFORCE++)."""
    needs_values: bool = False
    """Reads a value model's `values`: the trainer builds a critic for it (VAPO's GAE)."""
    needs_groups: bool = False
    """Compares a sample with the others of its group: a group of one gets no signal, so a config with
    ``rollout.group_size: 1`` is refused at load (`argym.algorithms.config.TrainConfig`)."""

    def __call__(self, inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
        return self.fn(inputs, config)


get_advantage = ADVANTAGES.get


def register_advantage(
    name: str,
    *,
    token_level: bool = False,
    whiten_tokens: bool = False,
    needs_values: bool = False,
    needs_groups: bool = False,
) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator filing an estimator under `name` with what it is (`Estimator`); returns it unchanged."""

    def deco(fn: AdvantageFn) -> AdvantageFn:
        estimator = Estimator(fn, token_level, whiten_tokens, needs_values, needs_groups)
        ADVANTAGES.add(name, estimator, module=fn.__module__)
        return fn

    return deco


def group_moments(rewards: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-group mean, Bessel-corrected std and size, plus each sample's group index.

    Returns ``(mean (G,), std (G,), count (G,), index (N,))``, where `index[i]`
    is the row of sample i's group in the (G,) tensors. Groups are the distinct
    values of `group_ids` (any integers, in any order). The std of a group of
    size 1 is reported as 0. Computed in float64 so hand-checked values match.
    """
    if rewards.dim() != 1 or rewards.shape != group_ids.shape:
        raise ValueError(
            f"rewards and group_ids must both have shape (N,), got "
            f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}."
        )
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


FLAT_ULPS = 4
"""A group is flat when its rewards spread over at most this many float32 ulps of its largest |reward|
(`flat_groups`). Rewards reach the learner as float32: one reward summed from its parts in another order
rounds to a neighbouring float32 (1 ulp), a few float32 additions to a few ulps; float32 cannot tell a real
difference that small from that rounding, and GRPO's std division would make it a full-size advantage."""


def flat_groups(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """Whether each sample's group is flat, (N,) bool: max − min ≤ FLAT_ULPS · 2⁻²³ · max |r| over the group.

    Relative, as GRPO's advantage is: scaling every reward by c changes no group's flatness. Exactly equal
    rewards (all 0 included) are flat; a group of one is flat.
    >>> flat_groups(torch.tensor([1.0, 1.0 + 2**-23, 0.0, 1e-4]), torch.tensor([0, 0, 1, 1]))
    tensor([ True,  True, False, False])
    """
    r = rewards.to(torch.float64)
    _, index = torch.unique(group_ids, return_inverse=True)  # (N,) values in [0, G)
    size = (int(index.max().item()) + 1 if index.numel() else 0,)

    def per_group(x: Tensor, how: str) -> Tensor:  # (G,)
        return torch.zeros(size, dtype=torch.float64).scatter_reduce(0, index, x, how, include_self=False)

    spread = per_group(r, "amax") - per_group(r, "amin")  # (G,)
    return (spread <= FLAT_ULPS * torch.finfo(torch.float32).eps * per_group(r.abs(), "amax"))[index]


def level_flat_groups(inputs: AdvantageInputs) -> AdvantageInputs:
    """`inputs` with each flat group's rewards equal to the bit (`flat_groups`): its largest one, moved onto
    the last policy token of `token_rewards` too, so every estimator gives a flat group what it gives equal
    rewards (0 for the group-relative ones) instead of scaling rounding up into an advantage."""
    flat = flat_groups(inputs.rewards, inputs.group_ids)  # (N,)
    if not flat.any():
        return inputs
    _, index = torch.unique(inputs.group_ids, return_inverse=True)  # (N,)
    top = torch.zeros(int(index.max()) + 1, dtype=inputs.rewards.dtype).scatter_reduce(
        0, index, inputs.rewards, "amax", include_self=False
    )  # (G,)
    rewards = torch.where(flat, top[index], inputs.rewards)  # (N,)
    token_rewards = inputs.token_rewards
    if token_rewards is not None and inputs.loss_mask is not None:
        rows, last = torch.arange(len(rewards)), _last_policy_token(inputs.loss_mask)  # (N,)
        token_rewards = token_rewards.clone()
        token_rewards[rows, last] += (rewards - inputs.rewards).to(token_rewards.dtype)
        token_rewards = token_rewards * inputs.loss_mask  # (N, T)
    return replace(inputs, rewards=rewards, token_rewards=token_rewards)


def group_normalized(rewards: Tensor, group_ids: Tensor, use_std: bool = True, eps: float = 1e-6) -> Tensor:
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
    if use_std:  # an all-equal group stays 0, also with eps 0 (not 0/0)
        adv = torch.where(adv != 0, adv / (std[index] + eps), adv)  # arXiv 2402.03300 §4.1.2
    adv = torch.where(count[index] > 1, adv, torch.zeros_like(adv))  # lone samples: no baseline
    return adv.to(rewards.dtype if rewards.is_floating_point() else torch.float32)


@register_advantage("grpo", needs_groups=True)
def grpo_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """GRPO (and, with ``adv_std=False``, Dr.GRPO) outcome advantages from the config."""
    return group_normalized(inputs.rewards, inputs.group_ids, use_std=config.adv_std, eps=config.adv_eps)


@register_advantage("drgrpo", needs_groups=True)
def drgrpo_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """Dr.GRPO: Â_i = r_i − mean_g r, no std (arXiv 2503.20783 eq. 2, "question-level bias")."""
    return group_normalized(inputs.rewards, inputs.group_ids, use_std=False)


@register_advantage("rloo", needs_groups=True)
def rloo_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """RLOO: Â_i = r_i − (1/(k−1)) Σ_{j≠i} r_j = k/(k−1)·(r_i − mean_g r) (arXiv 2402.14740 eq. 5).

    A group of size 1 has no other sample and gets 0.
    >>> rloo_advantage(AdvantageInputs(torch.tensor([1., 0., 0.]), torch.tensor([0, 0, 0])), None)
    tensor([ 1.0000, -0.5000, -0.5000])
    """
    rewards, group_ids = inputs.rewards, inputs.group_ids
    mean, _, count, index = group_moments(rewards, group_ids)
    k = count[index]  # (N,)
    adv = (rewards.to(torch.float64) - mean[index]) * k / (k - 1).clamp(min=1)  # (N,)
    adv = torch.where(k > 1, adv, torch.zeros_like(adv))
    return adv.float()


def masked_whiten(
    x: Tensor, mask: Tensor, eps: float = 1e-6, reduce: Callable[[Tensor], Tensor] | None = None
) -> Tensor:
    """(x − mean) / (std + eps) over the positions where ``mask > 0`` (Bessel std), 0 elsewhere; (B, T).

    `reduce` sums a tensor over processes (the learner passes its accelerator's), so
    mean and std are those of every process's tokens together and one process's share
    of the batch gets the single-process values. Fewer than two tokens, or all equal, give 0.
    """
    total = reduce or (lambda t: t)
    m = (mask > 0).to(torch.float64)
    v = x.to(torch.float64)
    n, s = (float(x) for x in total(torch.stack([m.sum(), (v * m).sum()])).tolist())
    if n < 2:
        return torch.zeros_like(x, dtype=torch.float32)
    mean = s / n
    sq = float(total((((v - mean) ** 2) * m).sum().reshape(1)).item())
    if sq == 0:  # all equal: 0, also with eps 0 (not 0/0)
        return torch.zeros_like(x, dtype=torch.float32)
    return ((v - mean) / (math.sqrt(sq / (n - 1)) + eps) * m).float()


def _last_policy_token(mask: Tensor) -> Tensor:
    """Column of each row's last policy token (B,) (the last column for a row without one)."""
    return (mask.shape[1] - 1) - (mask > 0).flip(1).to(torch.int64).argmax(dim=1)


@register_advantage("reinforce++", token_level=True, whiten_tokens=True)
def reinforce_pp_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """REINFORCE++: each token's return G_t = Σ_{s≥t} γ^{s−t} r_s over policy tokens; (B, T).

    r_s is the outcome (and any per-turn reward) on its token, minus β·KL_s on every
    token when ``kl_in_reward`` (arXiv 2501.03262 eq. 5-6: a token is credited with the
    KL of the tokens from it on, not the whole response's). The learner then whitens
    the returns over every policy token of the batch (eq. 7; ``whiten_tokens``),
    as OpenRLHF and verl do, so long responses weigh by their tokens.
    """
    return discounted_returns(*inputs.tokens(), config.gamma)


@register_advantage("reinforce++_baseline", token_level=True, whiten_tokens=True, needs_groups=True)
def reinforce_pp_baseline_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """REINFORCE++-baseline (arXiv 2501.03262 §3.2): the group's mean reward taken off each
    response's last policy token, then token returns as `reinforce_pp_advantage`; (B, T).

    A group of one loses its own reward (no baseline: only its KL terms are left).
    """
    token_rewards, mask = inputs.tokens()
    mean, _, _, index = group_moments(inputs.rewards, inputs.group_ids)
    rewards = token_rewards.clone()
    rows = torch.arange(len(rewards))
    rewards[rows, _last_policy_token(mask)] -= mean[index].to(rewards.dtype)
    return discounted_returns(rewards, mask, config.gamma)


# --------------------------------------------------------------------------- token level


def discounted_returns(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """G_t = r_t + γ·G_{t'} over policy tokens, t' the next policy token; (B, T) → (B, T).

    Positions with ``mask == 0`` (prompt, env replies, padding) are skipped: the
    return passes through them undiscounted and they get 0. A reward on a
    masked position still enters the return of the policy tokens before it.
    """
    out = torch.zeros_like(token_rewards, dtype=torch.float64)  # (B, T)
    running = torch.zeros(token_rewards.shape[0], dtype=torch.float64)  # (B,)
    m = mask > 0
    for t in range(token_rewards.shape[1] - 1, -1, -1):
        r = token_rewards[:, t].to(torch.float64)
        # discount only when stepping over a policy token
        running = torch.where(m[:, t], r + gamma * running, r + running)
        out[:, t] = torch.where(m[:, t], running, torch.zeros_like(running))
    return out.float()


def length_adaptive_lambda(
    lengths: Tensor, alpha: float = 0.05, low: float = 0.0, high: float = 0.999
) -> Tensor:
    """VAPO's λ_policy = 1 − 1/(α·l), clamped to [low, high]; (B,) → (B,).

    (VAPO, arXiv 2504.05118 eq. 7: Σ_t λ^t = 1/(1−λ) = α·l.) For l ≤ 1/α the raw
    value is ≤ 0, hence the clamp (docs/design.md, "VAPO's λ_policy rule").
    """
    lam = 1.0 - 1.0 / (alpha * lengths.to(torch.float64).clamp(min=1e-9))
    return lam.clamp(low, high).float()


def gae(
    token_rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float | Tensor = 1.0
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over policy tokens; returns ``(advantages, returns)`` (B, T).

    δ_t = r_t + γ V_{t'} − V_t,  Â_t = δ_t + γλ Â_{t'}  (arXiv 1506.02438 eq. 16),
    t' the next *policy* token (env tokens are skipped, docs/design.md), V = 0 after
    the last one. `lam` is a float or one λ per row (B,) (VAPO's length-adaptive
    λ). Returns R_t = Â_t + V_t; with λ = 1 these are the Monte-Carlo returns
    (VAPO's λ_critic = 1, arXiv 2504.05118 §3.2). Both are 0 off the mask.
    """
    B, T = token_rewards.shape
    lam_t = (
        torch.as_tensor(lam, dtype=torch.float64).expand(B)
        if not isinstance(lam, Tensor)
        else lam.to(torch.float64).expand(B)
    )  # (B,)
    m = mask > 0
    v = values.detach().to(torch.float64)
    adv = torch.zeros(B, T, dtype=torch.float64)
    next_v = torch.zeros(B, dtype=torch.float64)  # V of the next policy token
    next_a = torch.zeros(B, dtype=torch.float64)  # Â of the next policy token
    carry_r = torch.zeros(B, dtype=torch.float64)  # rewards on skipped (masked) positions
    for t in range(T - 1, -1, -1):
        r = token_rewards[:, t].to(torch.float64)
        delta = r + carry_r + gamma * next_v - v[:, t]
        a = delta + gamma * lam_t * next_a
        adv[:, t] = torch.where(m[:, t], a, torch.zeros_like(a))
        next_v = torch.where(m[:, t], v[:, t], next_v)
        next_a = torch.where(m[:, t], a, next_a)
        carry_r = torch.where(m[:, t], torch.zeros_like(carry_r), carry_r + r)
    returns = torch.where(m, adv + v, torch.zeros_like(adv))
    return adv.float(), returns.float()


@register_advantage("returns", token_level=True)
def returns_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """Token-level advantages from per-turn rewards: the discounted return at each policy token.

    Rewards sit on each turn's last policy token (`batch.token_rewards`); with
    ``adv_baseline`` the group's mean return at the first policy token is
    subtracted (a GRPO-style baseline, without std). (B, T).
    """
    token_rewards, mask = inputs.tokens()
    ret = discounted_returns(token_rewards, mask, config.gamma)  # (B, T)
    if not config.adv_baseline:
        return ret
    first = mask.argmax(dim=1)  # (B,) first policy token
    start = ret.gather(1, first[:, None]).squeeze(1)  # (B,)
    mean, _, count, index = group_moments(start, inputs.group_ids)
    base = torch.where(count[index] > 1, mean[index], torch.zeros_like(mean[index])).float()
    return (ret - base[:, None]) * mask


@register_advantage("gae", token_level=True, needs_values=True)
def gae_advantage(inputs: AdvantageInputs, config: LearnerConfig) -> Tensor:
    """VAPO's actor advantages: GAE with the critic's values and λ_policy per sequence (B, T).

    λ_policy = max(1 − 1/(α·l), lam_policy) with l the response's policy-token count when
    ``lam_alpha > 0`` (arXiv 2504.05118 eq. 7, α = 0.05), else the fixed ``lam_policy``. The floor
    (VC-PPO's 0.95) keeps short answers from λ ≤ 0 (l ≤ 1/α = 20), i.e. Â = [δ_1, …, δ_l] with no credit
    flowing back; the paper's long answers (l ≥ 400 at α = 0.05) get its adaptive λ unchanged.
    The critic's targets use λ_critic (decoupled GAE, §3.2) and are computed by the critic.
    """
    token_rewards, mask = inputs.tokens()
    if inputs.values is None:
        from argym.errors import ConfigError

        raise ConfigError(
            "advantage 'gae' needs a value model: build the Learner with critic= "
            "(argym.algorithms.value.Critic), as the trainer does for VAPO."
        )
    lam: float | Tensor
    if config.lam_alpha > 0:
        lam = length_adaptive_lambda(mask.sum(-1), config.lam_alpha, low=config.lam_policy)  # (B,)
    else:
        lam = config.lam_policy
    adv, _ = gae(token_rewards, inputs.values, mask, config.gamma, lam)
    return adv
