"""The learner's metrics: local sums per optimizer step, reduced across processes into `train/*` means.

`SUMS` names what `Learner.backward` accumulates over a mini-batch's micro-batches;
`reduce_metrics` is the one place that turns them (and the batch) into the
namespaced metrics `Learner.update` returns.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from argym.algorithms.advantages import flat_groups, group_moments
from argym.algorithms.batch import TrainBatch
from argym.types import Trajectory

if TYPE_CHECKING:
    from accelerate import Accelerator

    from argym.algorithms.learner_config import LearnerConfig

SUMS = (
    "loss",
    "pg_loss",
    "kl_loss",
    "clipped",
    "approx_kl",
    "entropy",
    "kl_ref",
    "tokens",
    "nll",
    "rows",
    "rows_skipped",
)
"""Per mini-batch, summed over micro-batches: the losses (already normalised), per-token sums of the
clipped tokens, the k3 estimate of KL(π_old‖π_θ), the entropy, the KL to π_ref and the token count, and
the mini-batch's rows and those whose forward was skipped (`skip_zero_advantage_rows`)."""


def zero_sums(device: torch.device) -> dict[str, Tensor]:
    """A mini-batch's `SUMS`, all zero, on `device`."""
    return {k: torch.zeros((), device=device) for k in SUMS}


def all_dropped_metrics(n_dropped: int) -> dict[str, float]:
    """The metrics of an update whose every trajectory was an infrastructure failure: nothing trained."""
    return {"train/infra_dropped": float(n_dropped)}


def reduce_metrics(
    batch: TrainBatch,
    totals: dict[str, Tensor],
    grad_norms: list[Tensor | None],
    accelerator: Accelerator,
    config: LearnerConfig,
    known_old: Tensor | None = None,
) -> dict[str, float]:
    """Reduce local sums across processes into namespaced per-token / per-mini-batch means.

    `grad_norms` has one entry per mini-batch with policy tokens: its norm, None where it took no step
    (no signal); `train/grad_norm` is the mean over the steps taken (0 without any). `batch.old_logprobs`
    is π_old (None when no mini-batch had a policy token) and feeds the training–inference mismatch
    against the sampler's log-probs, on the rows `known_old` ((B,) bool; None: all) where it was taken.
    `train/clip_frac`, `approx_kl` and `entropy` are over the tokens the training forward ran, absent when it
    ran none (`skip_zero_advantage_rows`; `train/rows_skipped` is the share of rows it left out).

    `train/varied_groups` is the fraction of the step's groups whose rewards are not all equal (not flat by
    the learner's own test, `flat_groups`, so it counts exactly the groups a group-relative advantage
    learns from; a group of one is flat): a run that keeps it at 0 learns nothing from its outcome.
    """
    taken = [n for n in grad_norms if n is not None]
    acc, dev = accelerator, accelerator.device
    mask = batch.loss_mask  # (B, L-1)
    has = batch.has_sampler_logprobs[:, None] & (mask > 0)  # (B, L-1)
    if known_old is not None:
        has &= known_old[:, None]
    old = batch.old_logprobs
    if old is None:  # no step was taken (no policy token anywhere)
        old, has = torch.zeros_like(mask), torch.zeros_like(has)
    gap = (old - batch.sampler_logprobs).abs() * has  # (B, L-1)
    adv = batch.advantages * mask
    _, r_std, r_count, _ = group_moments(batch.rewards, batch.group_ids)  # (G,)
    flat = flat_groups(batch.rewards, batch.group_ids)  # (B,)
    local = torch.stack(
        [totals.get(k, torch.zeros((), device=dev)).float().to(dev) for k in SUMS]
        + [
            torch.tensor(float(v), device=dev)
            for v in (
                len(grad_norms),
                gap.sum(),
                has.sum(),
                adv.sum(),
                (adv**2).sum(),
                mask.sum(),
                r_std[r_count > 1].sum(),
                (r_count > 1).sum(),
                batch.group_ids[~flat].unique().numel(),
                len(r_count),
                batch.num_dropped,
            )
        ]
    )
    names = ("minibatches", "gap", "gap_n", "adv", "adv2", "adv_n", "gstd", "groups", "varied", "all_groups")
    s = dict(zip(SUMS + names + ("dropped",), acc.reduce(local, reduction="sum").tolist()))
    gap_max = acc.reduce(gap.max().to(dev), reduction="max").item()
    # every process goes through the same mini-batches: the reduced sum counts them `num_processes` times
    minibatches, tok = max(s["minibatches"] / acc.num_processes, 1.0), max(s["tokens"], 1.0)
    adv_mean = s["adv"] / max(s["adv_n"], 1.0)
    out = {
        "train/loss": s["loss"] / minibatches,
        "train/pg_loss": s["pg_loss"] / minibatches,
        "train/grad_norm": float(torch.stack(taken).mean()) if taken else 0.0,
        "train/adv_mean": adv_mean,
        "train/adv_std": math.sqrt(max(s["adv2"] / max(s["adv_n"], 1.0) - adv_mean**2, 0.0)),
        "train/group_reward_std": s["gstd"] / max(s["groups"], 1.0),
        "train/varied_groups": s["varied"] / max(s["all_groups"], 1.0),
        "train/infra_dropped": s["dropped"],
        "train/optimizer_steps": float(len(taken)),
        "train/rows_skipped": s["rows_skipped"] / max(s["rows"], 1.0),
    }
    if s["tokens"] > 0:  # the training forward ran a policy token
        out["train/clip_frac"] = s["clipped"] / tok
        out["train/approx_kl"] = s["approx_kl"] / tok
        out["train/entropy"] = s["entropy"] / tok
    if config.kl_coef > 0:
        out["train/kl_ref"] = s["kl_ref"] / tok
        out["train/kl_loss"] = s["kl_loss"] / minibatches
    if config.nll_coef > 0:
        out["train/nll_loss"] = s["nll"] / minibatches
    if s["gap_n"] > 0:
        out["train/logprob_mismatch_mean"] = s["gap"] / s["gap_n"]
        out["train/logprob_mismatch_max"] = gap_max
    return out


def sample_advantages(trajectories: list[Trajectory], batch: TrainBatch) -> list[float | None]:
    """Each trajectory's advantage, averaged over its policy tokens (an outcome estimator's value
    itself), aligned with `trajectories`; None for an infra failure (not in the batch)."""
    mask = batch.loss_mask
    per_row = ((batch.advantages * mask).sum(1) / mask.sum(1).clamp(min=1)).tolist()  # (B,)
    rows = iter(per_row)
    return [None if t.infra_failure else float(next(rows)) for t in trajectories]
