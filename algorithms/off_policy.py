"""Training on tokens other weights sampled: where a step's batch comes from, how stale it may be, and the correction.

A trained token was sampled at some *version* of the policy (how many learner updates its weights
held; `Trajectory.policy_versions`). How far that version may lag the learner's is `rollout.mode`'s:

- `Lockstep` (sync): step j's batch is rolled out when the learner asks for it, at version j, and
  each update goes into the generator at once (so an evaluation right after samples it). Lag 0.
- `AheadOfLearner` (async), the *staleness gate*: the batch of step j is collected in its own
  thread once the generator holds version ≥ j − `max_staleness`, and handed over in step order. The
  learner trains batch j at version j and publishes version j + 1 after it, so every token trained
  at step j was sampled at a version in [j − max_staleness, j] (AReaL's staleness bound η, arXiv
  2505.24298). `version_lag` checks the bound on every batch and measures the lag.

A token sampled at an older version v was drawn from μ = π_v, not from the learner's π_old: the
*off-policy correction* `importance_weighted` multiplies its advantage by the truncated importance
weight min(π_old/μ, C) (`algorithm.tis_cap`: V-trace's ρ̄, arXiv 1802.01561 eq. 1). With the
learner's PPO clip on π_θ/π_old it is AReaL's decoupled PPO objective. The same weight corrects any
other sampler that is not π_old: R³L's retries, sampled with guidance the training context lacks.
docs/async.md has the design.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import Tensor

from argym.types import Trajectory

if TYPE_CHECKING:  # the learner imports the correction without the rollout side
    from argym.agents.scheduler import StreamingScheduler, VersionedGenerator

Batch = tuple[list[Trajectory], dict[str, float]]
"""A step's trajectories (rolled out and filtered, not yet scored) and the rollouts' metrics."""


class Batches(Protocol):
    """Where the trainer takes each step's batch from: `Lockstep` (sync) or `AheadOfLearner` (async)."""

    max_staleness: int
    """How many versions a trained token may lag the learner (`version_lag`'s bound)."""

    def take(self, step: int) -> Batch:
        """Step `step`'s batch."""
        ...

    def updated(self, version: int) -> None:
        """The learner has made `version` (in the model the batches were given)."""
        ...

    def pending(self) -> dict[int, Batch]:
        """The batches collected ahead of the learner and not yet taken, by step, once each is complete: what a
        checkpoint holds so that a resume trains them rather than drawing others (docs/async.md)."""
        ...

    def close(self) -> None: ...


class Lockstep:
    """Sync: `draw(step)` rolls step `step`'s batch out when it is taken; `updated` publishes each version at once."""

    max_staleness = 0

    def __init__(self, draw: Callable[[int], Batch], generator: VersionedGenerator, model: Any):
        self.draw, self.generator, self.model = draw, generator, model

    def take(self, step: int) -> Batch:
        return self.draw(step)

    def updated(self, version: int) -> None:
        self.generator.publish(self.model, version)

    def pending(self) -> dict[int, Batch]:
        """Nothing is drawn ahead."""
        return {}

    def close(self) -> None:
        """Nothing runs between two steps."""


class AheadOfLearner:
    """Async: collects the batch of step j (`draw(j)`) in its own thread once `generator` holds version ≥
    j − `max_staleness`; `take(j)` publishes version j (the weights of `model`) and hands the batch over.
    Steps from the first taken (`first`) to `last` − 1 are collected; nothing is before that first
    `take`, so nothing runs ahead of an evaluation before training.

    A version is published when its batch is taken, not when the learner makes it: by then the previous
    step's checkpoint is written, so at staleness 0 nothing is drawn ahead of a checkpoint and a resume
    is exact (docs/async.md).

    With `partial=False` the lag is fixed instead of bounded: batches are collected one at a time, in
    step order, and the publication of version v waits until every batch sampled at an older version
    is collected (`settle`). So the batch of step j is sampled whole at version
    max(first, j − max_staleness) and nothing depends on thread timing: the run reproduces exactly.
    It is the "one step off-policy" pipeline at staleness 1 (the learner trains step j while the
    generator samples step j + 1), without partial rollouts. `streaming`, the scheduler the batches'
    episodes run through (partial rollouts), is closed first on `close`, so batches in flight fail fast.

    A checkpoint holds the batches collected ahead (`pending`), and a resumed run gets them back (`restored`):
    it trains them, sampled by the weights that sampled them, instead of drawing new ones, and admits the
    first step after them, so the run goes on as if never stopped (docs/async.md, "Exact resume").
    """

    def __init__(
        self,
        draw: Callable[[int], Batch],
        generator: VersionedGenerator,
        model: Any,
        max_staleness: int,
        last: int,
        partial: bool = True,
        streaming: StreamingScheduler | None = None,
        restored: dict[int, Batch] | None = None,
    ):
        self.draw, self.generator, self.model = draw, generator, model
        self.max_staleness, self.last, self.partial = max_staleness, last, partial
        self.streaming = streaming
        self.first: int | None = None
        self._taken: int | None = None  # the last step taken: the version the generator holds
        self._stop = threading.Event()
        self._futures: dict[int, Future[Batch]] = {}
        for step, batch in (restored or {}).items():
            done: Future[Batch] = Future()
            done.set_result(batch)
            self._futures[step] = done
        self._next = max(self._futures) + 1 if self._futures else None  # the first step `_admit` admits
        self._admitted = threading.Condition()
        workers = max_staleness + 1 if partial else 1  # one worker runs the batches in the order admitted
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="argym-batch")
        self._thread = threading.Thread(target=self._admit, name="argym-ahead", daemon=True)

    def take(self, step: int) -> Batch:
        """Publish version `step`, then step `step`'s batch, once collected (re-raises what its collection raised)."""
        if self.first is None:
            self.first = step
        else:
            self._settle(step)
        self.generator.publish(self.model, step)
        self._taken = step
        if self._thread.ident is None:
            self._thread.start()
        future = self._future(step)
        with self._admitted:
            del self._futures[step]
        return future.result()

    def updated(self, version: int) -> None:
        """Nothing yet: the next `take` publishes it."""

    def pending(self) -> dict[int, Batch]:
        """Every batch admitted and not taken, once collected. Which they are is fixed by the version published
        (the steps after the last taken, up to it + `max_staleness`), not by how far the admitting thread has
        got, and none after them is admitted before the next `take`: a checkpoint written now holds them all
        and the task sampler's position right after their draws. Waiting for them to finish (rather than
        cutting episodes short) is what makes it exact: an episode's env cannot be saved mid-way in general."""
        if self._taken is None:  # nothing admitted yet: the batches restored, if any
            return {step: future.result() for step, future in self._futures.items()}
        steps = range(self._taken + 1, min(self._taken + self.max_staleness, self.last - 1) + 1)
        return {step: self._future(step).result() for step in steps}

    def close(self) -> None:
        """Stop admitting batches and wait for those in flight (their results are dropped)."""
        if self.streaming is not None:
            self.streaming.close()
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=60)
        self._workers.shutdown(wait=True, cancel_futures=True)

    def _admit(self) -> None:
        assert self.first is not None
        step = self.first if self._next is None else self._next
        while step < self.last and self.generator.wait_for(step - self.max_staleness, self._stop):
            with self._admitted:
                self._futures[step] = self._workers.submit(self.draw, step)
                self._admitted.notify_all()
            step += 1

    def _future(self, step: int) -> Future[Batch]:
        with self._admitted:
            while step not in self._futures:
                self._admitted.wait()
            return self._futures[step]

    def _settle(self, version: int) -> None:
        """`partial=False`: return once every batch sampled at a version below `version` is collected
        (the batches of steps ≤ version − 1 + max_staleness); at once with partial rollouts."""
        assert self.first is not None
        last = min(version - 1 + self.max_staleness, self.last - 1)
        if self.partial or version <= self.first or last < self.first:
            return
        wait([self._future(last)])  # one worker, in step order: the earlier batches are done too


def version_lag(trajectories: list[Trajectory], version: int, bound: int) -> dict[str, float]:
    """Mean and max lag (learner version − the version that sampled it) over the trained policy tokens.

    Tokens of unknown version (-1, or a trajectory that records none) are left out. Raises if a
    token lags more than `bound` (max_staleness): the staleness gate's guarantee, checked.
    """
    lags = [
        version - v
        for t in trajectories
        if not t.infra_failure and len(t.policy_versions) == len(t.loss_mask)
        for v, m in zip(t.policy_versions, t.loss_mask)
        if m and v >= 0
    ]
    if not lags:
        return {}
    if max(lags) > bound or min(lags) < 0:
        raise RuntimeError(
            f"trained tokens lag the learner (version {version}) by {min(lags)}..{max(lags)} versions; "
            f"rollout.max_staleness allows 0..{bound}. This is a bug in the rollout scheduler."
        )
    return {"train/version_lag_mean": sum(lags) / len(lags), "train/version_lag_max": float(max(lags))}


def truncated_is_weight(
    old_logp: Tensor, sampler_logp: Tensor, mask: Tensor, has_sampler: Tensor, cap: float
) -> Tensor:
    """min(π_old/μ, C) per token, (B, T); 1 where the sampler's log-prob is unknown or off the mask.

    μ is the distribution the token was sampled from (older weights; for an R³L retry, the
    guidance in context); π_old is the policy on the training context.
    """
    log_w = (old_logp - sampler_logp).clamp(max=math.log(cap))  # (B, T)
    known = has_sampler.to(torch.bool)[:, None] & (mask > 0)  # (B, T)
    return torch.where(known, torch.exp(log_w), torch.ones_like(old_logp))


def importance_weighted(batch: Any, config: Any) -> Tensor:
    """The advantages the loss takes: × min(π_old/μ, C) per token with `tis_cap: C`, else unchanged.

    Applied to each micro-batch right before its loss, where π_old exists on every path (a separate
    no-grad pass, or the training forward itself when fully on-policy), and never stored: the batch's
    advantages, and what the step logs of them, stay the estimator's. Anything that rewrites
    advantages (R³L's amplification, `credit_step`) therefore acts before it.
    """
    adv: Tensor = batch.advantages
    if getattr(config, "tis_cap", None) is None:
        return adv
    w = truncated_is_weight(
        batch.old_logprobs,
        batch.sampler_logprobs,
        batch.loss_mask,
        batch.has_sampler_logprobs,
        config.tis_cap,
    )
    return adv * w
