"""Per-token policy losses, KL estimators and loss aggregation.

Three registries, each filled by name so presets only pick names:
- policy losses (`@register_policy_loss("ppo_clip")`) map log-probs and
  advantages to a per-token loss (B, T) and a mask of the tokens whose
  gradient a clip removed: "ppo_clip" (per-token ratio), "gspo" (sequence
  ratio, arXiv 2507.18071) and "gspo_token";
- KL estimators (`@register_kl("k3")`) give a per-token KL to the reference;
- aggregations reduce a per-token loss (B, T) to a scalar.

Aggregation always divides by counts of the whole global (mini-)batch, which
the caller passes in (docs/design.md, Learners; verl's `global_batch_info`). Hence the
aggregated losses of the micro-batches sum to the loss of the full batch, and
the gradient does not depend on how the batch was split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import torch
from torch import Tensor

from argym.algorithms.registry import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES

if TYPE_CHECKING:
    from argym.algorithms.learner_config import LearnerConfig

# verl clamps log-ratios to ±20 before exponentiating (core_algos.py,
# compute_policy_loss_vanilla and kl_penalty_forward) so exp() cannot overflow.
LOG_RATIO_CLAMP = 20.0


class PolicyLossFn(Protocol):
    """A registered policy loss: (per-token loss (B, T), clipped-token mask (B, T))."""

    def __call__(
        self, logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: LearnerConfig
    ) -> tuple[Tensor, Tensor]: ...


register_policy_loss = POLICY_LOSSES.register
get_policy_loss = POLICY_LOSSES.get

register_kl = KL_ESTIMATORS.register
get_kl = KL_ESTIMATORS.get

register_aggregation = AGGREGATIONS.register

# --------------------------------------------------------------------------- policy losses


def clipped_surrogate(
    log_ratio: Tensor,
    adv: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor]:
    """PPO's clipped surrogate as a loss to minimise, from a log importance ratio.

    L = max(−Â·ρ, −Â·clip(ρ, 1 − ε_low, 1 + ε_high)),  ρ = exp(log_ratio)
      (PPO, arXiv 1707.06347 eq. 7; decoupled ε_low/ε_high "clip-higher", DAPO arXiv 2503.14476 eq. 10)
    and, with ``dual_clip=c`` (c > 1), for Â < 0: L = min(L, −Â·c)
      (dual-clip PPO, arXiv 1912.09729 eq. 5; verl's `clip_ratio_c`).

    `log_ratio` is (B, T) per token or (B, 1) per sequence (GSPO); it broadcasts
    against `adv` (B, T). Returns ``(loss, clipped)`` of the broadcast shape,
    where `clipped` marks the entries whose gradient a clip set to zero.
    """
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # verl's ±20
    ratio = torch.exp(log_ratio)  # (B, T) or (B, 1)
    unclipped = -adv * ratio
    clipped_loss = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped_loss)  # arXiv 1707.06347 eq. 7 (negated)
    clipped = clipped_loss > unclipped
    if dual_clip is not None:
        lower = -adv * dual_clip  # arXiv 1912.09729 eq. 5: bounds the loss when Â < 0 and ρ ≫ 1
        dual = (adv < 0) & (loss > lower)
        loss = torch.where(dual, lower, loss)
        clipped = clipped | dual
    return loss, clipped


def ppo_clip_loss(
    logp: Tensor,
    old_logp: Tensor,
    adv: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[Tensor, Tensor]:
    """The clipped surrogate with the per-token ratio ρ_t = π_θ(y_t)/π_old(y_t), all (B, T).

    Returns ``(loss (B, T), clipped (B, T) bool)``; mask padding yourself.
    """
    return clipped_surrogate(logp - old_logp, adv, clip_low, clip_high, dual_clip)


def sequence_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO's length-normalised sequence log-ratio, (B, 1).

    log s_i = (1/|y_i|) Σ_t M_{i,t} (log π_θ − log π_old)  (GSPO, arXiv 2507.18071 eq. 7);
    |y_i| counts policy tokens; a row without policy tokens gets 0.
    """
    m = mask.to(logp.dtype)
    diff = torch.where(m > 0, logp - old_logp, torch.zeros_like(logp))  # (B, T)
    return (diff.sum(-1) / m.sum(-1).clamp(min=1.0)).unsqueeze(-1)  # (B, 1)


@register_policy_loss("ppo_clip")
def _ppo_clip(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: LearnerConfig
) -> tuple[Tensor, Tensor]:
    """Token-level ratio with (decoupled, optionally dual) clipping: GRPO, DAPO, VAPO."""
    return ppo_clip_loss(logp, old_logp, adv, config.clip_low, config.clip_high, config.dual_clip)


@register_policy_loss("gspo")
def _gspo(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: LearnerConfig
) -> tuple[Tensor, Tensor]:
    """GSPO: one clipped ratio s_i per sequence (arXiv 2507.18071 eq. 5), broadcast to its tokens.

    With outcome advantages and seq-mean-token-mean aggregation this is exactly
    (1/G) Σ_i min(s_i Â_i, clip(s_i) Â_i), as TRL's importance_sampling_level="sequence".
    """
    log_s = sequence_log_ratio(logp, old_logp, mask)  # (B, 1)
    loss, clipped = clipped_surrogate(log_s, adv, config.clip_low, config.clip_high, config.dual_clip)
    return loss.expand_as(logp), clipped.expand_as(logp)  # (B, T)


@register_policy_loss("gspo_token")
def _gspo_token(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, config: LearnerConfig
) -> tuple[Tensor, Tensor]:
    """GSPO-token: s_{i,t} = sg[s_i] · π_θ(y_t) / sg[π_θ(y_t)] (arXiv 2507.18071 eq. 13).

    Its value is s_i and, with Â_{i,t} = Â_i, its gradient is GSPO's; it allows
    per-token advantages (multi-turn, process rewards).
    """
    log_s = sequence_log_ratio(logp, old_logp, mask).detach()  # (B, 1)
    log_ratio = log_s + logp - logp.detach()  # (B, T): value log s_i, gradient ∇log π_θ(y_t)
    return clipped_surrogate(log_ratio, adv, config.clip_low, config.clip_high, config.dual_clip)


def nll_loss(logp: Tensor, mask: Tensor, positive: Tensor, global_positive_tokens: float) -> Tensor:
    """VAPO's LM loss on positive samples, summed here, normalised over the global batch.

    L_NLL = −(1/Σ_{o∈T}|o|) Σ_{o∈T} Σ_t log π_θ(o_t)  (VAPO, arXiv 2504.05118 eq. 8),
    T the correct responses of the batch. `positive` is (B,) bool; returns a
    scalar that is 0 (with a graph) when no sample is positive.
    """
    m = mask.to(logp.dtype) * positive.to(logp.dtype)[:, None]  # (B, T)
    total = torch.where(m > 0, -logp, torch.zeros_like(logp)).sum()
    return total / max(float(global_positive_tokens), 1.0)


# --------------------------------------------------------------------------- KL estimators
# Schulman, "Approximating KL Divergence" (2020, blog): k1, k2, k3 estimate KL(π_θ‖π_ref)
# from samples of π_θ. Used as a loss term (GRPO, arXiv 2402.03300 eq. 4) or, with
# `kl_in_reward`, summed over a response and subtracted from its reward (RLOO, REINFORCE++).


@register_kl("k1")
def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = log π_θ − log π_ref: unbiased, high variance, can be negative."""
    return logp - ref_logp


@register_kl("k2")
def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = ½ (log π_θ − log π_ref)²: low variance, biased."""
    return 0.5 * (logp - ref_logp) ** 2


@register_kl("k3")
def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = π_ref/π_θ − log(π_ref/π_θ) − 1 ≥ 0 (GRPO's KL, arXiv 2402.03300 eq. 4; verl "low_var_kl").

    Clamped as verl's `kl_penalty_forward`: log-ratio to ±20, value to [−10, 10].
    Note its gradient as a loss is a biased estimate of ∇KL (volcengine/verl PR 2953, huggingface/trl 4637).
    """
    log_ratio = (ref_logp - logp).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # (B, T)
    return (torch.exp(log_ratio) - log_ratio - 1.0).clamp(-10.0, 10.0)


# --------------------------------------------------------------------------- aggregation


def _token_mean(
    masked: Tensor, mask: Tensor, global_tokens: float, global_seqs: float, constant: float | None
) -> Tensor:
    # Σ_{i,t} M·L / Σ_{i,t} M over the global batch (DAPO, arXiv 2503.14476 eq. 8; verl default)
    return masked.sum() / global_tokens


def _seq_mean_token_mean(
    masked: Tensor, mask: Tensor, global_tokens: float, global_seqs: float, constant: float | None
) -> Tensor:
    # (1/B) Σ_i (Σ_t M·L / |o_i|)  (GRPO, arXiv 2402.03300 eq. 3); |o_i| counts policy tokens
    seq_len = mask.sum(dim=-1).clamp(min=1.0)  # (B,)
    return (masked.sum(dim=-1) / seq_len).sum() / global_seqs


def _seq_mean_token_sum(
    masked: Tensor, mask: Tensor, global_tokens: float, global_seqs: float, constant: float | None
) -> Tensor:
    # (1/B) Σ_i Σ_t M·L
    return masked.sum() / global_seqs


def _seq_mean_token_sum_norm(
    masked: Tensor, mask: Tensor, global_tokens: float, global_seqs: float, constant: float | None
) -> Tensor:
    # (1/B) Σ_i Σ_t M·L / C  (Dr.GRPO, arXiv 2503.20783 eq. 2 with the token sum scaled by a
    # constant C, e.g. the max generation length; as TRL's "dr_grpo": B·C). verl omits the
    # 1/B, which makes the loss scale with the batch size (verl #3741); argym keeps it.
    if constant is None or constant <= 0:
        raise ValueError(
            "loss aggregation 'seq-mean-token-sum-norm' needs a positive constant "
            f"(e.g. the max generation length), got {constant!r}."
        )
    return masked.sum() / (global_seqs * constant)


for _name, _fn in [
    ("token-mean", _token_mean),
    ("seq-mean-token-mean", _seq_mean_token_mean),
    ("seq-mean-token-sum", _seq_mean_token_sum),
    ("seq-mean-token-sum-norm", _seq_mean_token_sum_norm),
]:
    AGGREGATIONS.register(_name)(_fn)


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    mode: str,
    global_tokens: float,
    global_seqs: float,
    constant: float | None = None,
) -> Tensor:
    """Reduce a per-token loss (B, T) to a scalar, normalised by the GLOBAL batch.

    `global_tokens` is Σ M and `global_seqs` is the number of sequences over the
    whole mini-batch (all micro-batches, all processes), not over `per_token`'s
    rows, so summing this over the micro-batches of a batch gives the batch's
    loss. Modes (named as verl's `agg_loss` names them):

    - ``token-mean``: Σ_{i,t} M·L / global_tokens
    - ``seq-mean-token-mean``: Σ_i (Σ_t M·L / |o_i|) / global_seqs, |o_i| = Σ_t M_i,t
      (a sequence with no policy token contributes 0 but still counts in global_seqs)
    - ``seq-mean-token-sum``: Σ_{i,t} M·L / global_seqs
    - ``seq-mean-token-sum-norm``: Σ_{i,t} M·L / (global_seqs · constant)
    """
    if per_token.shape != mask.shape:
        raise ValueError(
            f"per_token {tuple(per_token.shape)} and mask {tuple(mask.shape)} "
            "must have the same (B, T) shape."
        )
    if global_tokens <= 0 or global_seqs <= 0:
        raise ValueError(
            f"global_tokens and global_seqs must be positive, got {global_tokens} "
            f"and {global_seqs}; a batch without policy tokens cannot be trained on."
        )
    mask = mask.to(per_token.dtype)
    # where(), not ×, so a NaN/inf on a padded position cannot leak into the sum
    masked = torch.where(mask > 0, per_token, torch.zeros_like(per_token))  # (B, T)
    loss: Tensor = AGGREGATIONS.get(mode)(masked, mask, float(global_tokens), float(global_seqs), constant)
    return loss
