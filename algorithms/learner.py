"""The one learner: advantages → π_old → epochs × mini-batches of clipped policy-gradient steps.

`Learner.update` has the fixed shape of CleanRL's `ppo.py` (one loop, read top
to bottom) and is composed from registered parts named in `LearnerConfig`
(`advantage`, `policy_loss`, `kl_estimator`, `loss_agg`), so GRPO, Dr.GRPO,
DAPO, ... are config presets. It is built on `accelerate.Accelerator`:

- each process passes its own trajectories (whole groups) to `update`;
- every mini-batch loss is normalised by token / sequence counts summed over
  all micro-batches *and* processes (docs/design.md, Learners), so the gradient does not
  depend on `micro_batch_size` or on the number of processes;
- gradients are accumulated over micro-batches with `no_sync` until the last
  one; since DDP/FSDP average gradients over processes and the loss already
  has the global normaliser, each process's loss is multiplied by the number
  of processes before `backward`.

π_old (the ratio's denominator) is recomputed here on the exact training
context at the sampling temperature (docs/design.md, Agents and rollouts); the
sampler's log-probs only feed the training–inference mismatch metric.

Its parts live beside it: the micro-batch forward (`forward`), the micro-batch loss (`learner_loss`), the
metrics (`learner_metrics`) and the advantages over all processes (`learner_advantages`).
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from argym.algorithms import fsdp
from argym.algorithms.advantages import gae
from argym.algorithms.batch import TrainBatch, make_batch, split_batch, stack_rows, whole_group_minibatches
from argym.algorithms.credit import credit_step
from argym.algorithms.forward import can_share_prefix, disable_dropout, token_logprobs
from argym.algorithms.learner_advantages import compute_advantages, has_signal, rows_to_run
from argym.algorithms.learner_config import LearnerConfig
from argym.algorithms.learner_loss import Normaliser, micro_batch_loss
from argym.algorithms.learner_metrics import all_dropped_metrics, reduce_metrics, sample_advantages, zero_sums
from argym.algorithms.registry import KL_ESTIMATORS, POLICY_LOSSES
from argym.algorithms.weight_grid import SamplerGrid, narrower
from argym.errors import ConfigError
from argym.types import Trajectory

if TYPE_CHECKING:
    from accelerate import Accelerator

    from argym.algorithms.value import Critic

__all__ = ["Learner", "LearnerConfig", "disable_dropout"]


class Learner:
    """Policy-gradient updates of `model` from trajectories, through an `Accelerator`.

    Builds AdamW over the trainable parameters and `accelerator.prepare`s model
    and optimizer (so build the Accelerator with gradient_accumulation_steps=1:
    the learner accumulates micro-batches itself). `ref_model` is required when
    ``config.kl_coef > 0``; it is frozen and prepared for evaluation. With
    ``config.fsdp`` on several processes the model is sharded in place with FSDP2
    instead of prepared, and AdamW holds the shards (algorithms/fsdp.py).

    The model's dropout is switched off (`disable_dropout`), as verl and OpenRLHF
    do for RL: π_old is a deterministic forward, and a training forward with
    dropout (attention or LoRA) would make the ratio ≠ 1 at θ = θ_old. π_old is
    also computed on the training forward's own path (same micro-batches, hence the
    same shapes, padding and shared-prompt plan), so in bf16 it matches to the bit.
    """

    def __init__(
        self,
        model: nn.Module,
        config: LearnerConfig,
        accelerator: Accelerator,
        ref_model: nn.Module | None = None,
        critic: Critic | None = None,
    ):
        if accelerator.gradient_accumulation_steps != 1:
            raise ConfigError(
                "Learner accumulates micro-batches itself; build the Accelerator "
                "with gradient_accumulation_steps=1 and set micro_batch_size instead."
            )
        if config.kl_coef > 0 and ref_model is None:
            raise ConfigError(
                f"kl_coef={config.kl_coef} needs a reference model; pass ref_model= "
                "(a frozen copy of the initial policy) or set kl_coef=0."
            )
        self.config = config
        self.sample_advantages: list[float | None] = []
        """The last update's advantage of each trajectory (mean over its policy tokens; None: dropped)."""
        self.accelerator = accelerator
        self.fsdp = config.fsdp and accelerator.num_processes > 1
        if self.fsdp:
            fsdp.check(accelerator, ref_model, critic)
            fsdp.shard(model, accelerator.device.type)
        disable_dropout(model)
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=config.lr, weight_decay=config.weight_decay
        )
        if self.fsdp:
            # the optimizer holds the shards; forwards use the gathered weights (algorithms/fsdp.py)
            self.model, self.optimizer = model, optimizer
            fsdp.gather(model)
        else:
            self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.ref_model = None
        if ref_model is not None:
            ref_model.requires_grad_(False)
            self.ref_model = accelerator.prepare_model(ref_model, evaluation_mode=True)
        self.critic = critic  # VAPO's value model (advantage "gae"); trained after each policy update
        self.policy_loss_fn = POLICY_LOSSES.get(config.policy_loss)
        self.kl_fn = KL_ESTIMATORS.get(config.kl_estimator)
        self._shuffle_gen = torch.Generator().manual_seed(config.seed)
        self.grid: SamplerGrid | None = None  # `keep_weights_on`: the policy held in the sampler's dtype
        self._saved_masters: list[Tensor] | None = None  # a resumed run's, until `keep_weights_on`

    def keep_weights_on(self, dtype: torch.dtype) -> bool:
        """Train the policy the sampler runs: its weights rounded to the sampler's `dtype` (a bf16 engine),
        the optimizer stepping on float32 masters (algorithms/weight_grid.py); the weights are rounded now.

        The KL reference, a copy of the float32 policy, is rounded too: KL = 0 at the start, as unrounded it
        is not. Returns whether it applies: not when every trainable weight already fits `dtype`, nor under
        FSDP (the optimizer holds shards there). Call it once the sampler exists, after `load_state_dict`."""
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if self.fsdp or not narrower(dtype, params):
            return False
        self.grid = SamplerGrid(params, dtype, masters=self._saved_masters)
        self._saved_masters = None
        if self.ref_model is not None:
            unwrap = self.accelerator.unwrap_model
            self.grid.round_copy(unwrap(self.ref_model), unwrap(self.model))
        return True

    def _forward(
        self, model: nn.Module, mb: TrainBatch, entropy: bool = False, entropy_grad: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """`token_logprobs` of `model` on one micro-batch at the sampling temperature, (b, l-1).

        Group prompts run once (algorithms/prefix.py) unless `share_prompt_forward` is off, the model
        recomputes activations (gradient checkpointing keeps no key/value cache) or is sharded: a
        micro-batch then takes one forward or two depending on this rank's rows, and FSDP hooks each
        forward's backward, so the ranks' collectives could disagree (not tried: docs/scaling.md)."""
        share = (
            self.config.share_prompt_forward
            and not self.fsdp
            and can_share_prefix(self.accelerator.unwrap_model(model))
        )
        return token_logprobs(model, mb, self.config.temperature, share, entropy, entropy_grad)

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs besides the weights: optimizer moments and the mini-batch shuffle RNG.
        FSDP: the whole optimizer state keyed by parameter name, on the main process (all ranks call this)."""
        optimizer = (
            fsdp.full_optimizer_state(self.model, self.optimizer)
            if self.fsdp
            else self.optimizer.state_dict()
        )
        state = {"optimizer": optimizer, "shuffle_rng": self._shuffle_gen.get_state()}
        if self.grid is not None:  # the float32 masters: the weights alone are rounded
            state["masters"] = self.grid.masters
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.fsdp:
            fsdp.load_optimizer_state(self.model, self.optimizer, state["optimizer"])
        else:
            self.optimizer.load_state_dict(state["optimizer"])
        self._shuffle_gen.set_state(state["shuffle_rng"])
        masters = state.get("masters")
        if masters is not None and self.grid is not None:
            self.grid = SamplerGrid(self.grid.params, self.grid.dtype, masters=masters)
        else:
            self._saved_masters = masters

    def checkpoint(self) -> dict[str, Any]:
        """The learner's part of a run's checkpoint: `state_dict`, and the critic's weights and optimizer."""
        critic = self.critic
        return {
            "learner": self.state_dict(),
            "critic": critic.model.state_dict() if critic is not None else None,
            "critic_optimizer": critic.optimizer.state_dict() if critic is not None else None,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Back to a `checkpoint()` (a checkpoint written before the critic was kept leaves it as built)."""
        self.load_state_dict(state["learner"])
        if self.critic is not None and state.get("critic") is not None:
            self.critic.model.load_state_dict(state["critic"])
            self.critic.optimizer.load_state_dict(state["critic_optimizer"])

    def close(self) -> None:
        """Nothing to release in this process (a `RayLearner` ends its actor)."""

    def fit_values(self, trajectories: list[Trajectory], pad_id: int) -> dict[str, float]:
        """One step of VAPO's value pretraining (arXiv 2504.05118 §3.1): the critic towards the
        Monte-Carlo returns of `trajectories`, the policy untouched."""
        assert self.critic is not None  # value pretraining runs for an estimator that needs values
        batch = self.prepare_batch(
            trajectories, pad_id, advantages=torch.zeros(len(trajectories)), old_logprobs=False
        )
        return self.critic.update(batch, self.value_targets(batch))

    @torch.no_grad()
    def logprobs(
        self, batch: TrainBatch, model: nn.Module | None = None, minibatches: list[Tensor] | None = None
    ) -> Tensor:
        """Log-probs (B, L-1) of `batch`'s targets under `model` (default: the policy) at T.

        No grad, eval mode (dropout is off either way), 0 on padding, returned on
        the CPU like the rest of a `TrainBatch`. The rows go through the forward as
        the update's micro-batches do: `micro_batch_size` rows of each of
        `minibatches` (row indices; default: all rows in order), so π_old and the
        training forward see the same shapes and take the same numerical path.
        """
        model = self.model if model is None else model
        was_training = model.training
        model.eval()
        out = torch.zeros(batch.loss_mask.shape, dtype=torch.float32)  # (B, L-1)
        for rows in minibatches if minibatches is not None else [torch.arange(len(batch))]:
            start = 0
            for mb in split_batch(batch.select(rows), self.config.micro_batch_size):
                logp, _ = self._forward(model, mb.to(self.accelerator.device))
                out[rows[start : start + len(mb)], : logp.shape[1]] = logp.cpu()
                start += len(mb)
        model.train(was_training)
        return out * (batch.attention_mask[:, 1:] > 0)

    # ----------------------------------------------------------------------- update

    def prepare_batch(
        self,
        trajectories: list[Trajectory],
        pad_id: int,
        advantages: Tensor | list[list[float]] | None = None,
        old_logprobs: bool = True,
        minibatches: list[Tensor] | None = None,
    ) -> TrainBatch:
        """Advantages, padding, π_old and (if kl_coef > 0) π_ref: everything before the steps.

        Without `advantages`, outcome advantages come from `traj.reward` and
        `traj.group` through the configured estimator, over the trajectories
        that are not infra failures. Otherwise pass them aligned with
        `trajectories`: (N,) per trajectory, or token-level lists (see `make_batch`).
        With ``old_logprobs=False`` π_old is left to the training forward
        (`update` does so when `reuses_training_forward`); `minibatches` is the
        first epoch's partition, for π_old to take the training forward's path.
        """
        given = advantages is not None
        # without advantages, zeros hold their place until π_old / π_ref exist
        batch = make_batch(
            trajectories, advantages if advantages is not None else torch.zeros(len(trajectories)), pad_id
        )
        if old_logprobs:
            batch.old_logprobs = self.logprobs(batch, minibatches=minibatches)
        if self.config.kl_coef > 0:  # on π_old's path: at θ = θ_ref the KL is 0 to the bit
            batch.ref_logprobs = self.logprobs(batch, model=self.ref_model, minibatches=minibatches)
        if self.critic is not None:
            batch.values = self.critic.values(batch)
        if not given:
            batch.advantages = compute_advantages(batch, self.config, self.accelerator)
        credit_step(batch, self.config)  # step 5: credit; the IS weight acts in `backward`
        return batch

    @property
    def reuses_training_forward(self) -> bool:
        """Fully on-policy (one epoch, one mini-batch, no KL in the reward): π_old is the training
        forward's own log-probs, detached, so the separate no-grad pass is skipped (as TRL does
        when num_iterations == 1). The ratio is then exactly 1 and the gradient unchanged; a
        truncated importance weight min(π_old/μ, C) is taken from the same forward, per micro-batch."""
        cfg = self.config
        return cfg.ppo_epochs == 1 and cfg.num_minibatches == 1 and not (cfg.kl_in_reward and cfg.kl_coef > 0)

    def update(
        self,
        trajectories: list[Trajectory],
        pad_id: int,
        advantages: Tensor | list[list[float]] | None = None,
    ) -> dict[str, float]:
        """`ppo_epochs` × `num_minibatches` optimizer steps on `trajectories`; returns metrics.

        Each trajectory needs `token_ids`, `loss_mask` (first token not a policy
        token), `reward` and `group` (samples of one task share it, and a group
        must be whole within this call); `sampler_logprobs` is optional.
        Trajectories with `infra_failure` are dropped before the advantages.
        A process holding fewer than `num_minibatches` trajectories makes every
        process take that many steps instead (`train/optimizer_steps` shows it).
        """
        cfg = self.config
        n_dropped = sum(t.infra_failure for t in trajectories)
        if n_dropped == len(trajectories):
            return all_dropped_metrics(n_dropped)
        groups = torch.tensor([t.group for t in trajectories if not t.infra_failure])  # the batch's rows
        n_minibatches = self._num_minibatches(len(groups))
        shuffle = self._shuffle_gen if cfg.shuffle else None
        first = whole_group_minibatches(groups, n_minibatches, shuffle)  # epoch 1's, also π_old's path
        on_policy = self.reuses_training_forward  # then π_old is the first training forward
        batch = self.prepare_batch(
            trajectories, pad_id, advantages, minibatches=first, old_logprobs=not on_policy
        )
        self.sample_advantages = sample_advantages(trajectories, batch)
        totals: dict[str, Tensor] = {}
        grad_norms: list[Tensor | None] = []  # None: a mini-batch without signal, no step
        known_old = None if on_policy else torch.ones(len(batch), dtype=torch.bool)  # rows with π_old
        for epoch in range(cfg.ppo_epochs):
            for rows in first if epoch == 0 else whole_group_minibatches(groups, n_minibatches, shuffle):
                mini = batch.select(rows)
                run = rows_to_run(mini, cfg, self.accelerator, self.fsdp)
                sums, logp = self.backward(mini, run)
                if logp is not None:  # π_old was this forward: keep it for the mismatch metric
                    if batch.old_logprobs is None:
                        batch.old_logprobs = torch.zeros_like(batch.loss_mask)
                        known_old = torch.zeros(len(batch), dtype=torch.bool)
                    assert known_old is not None  # set with old_logprobs
                    batch.old_logprobs[rows] = logp
                    known_old[rows[run]] = True
                if sums is None:  # no policy token in this mini-batch on any process
                    continue
                grad_norms.append(self._step(has_signal(mini, cfg, self.accelerator)))
                for k, v in sums.items():
                    totals[k] = totals.get(k, 0) + v
        metrics = reduce_metrics(batch, totals, grad_norms, self.accelerator, cfg, known_old)
        if self.critic is not None:  # decoupled GAE: the critic regresses on λ_critic returns (VAPO §3.2)
            metrics.update(self.critic.update(batch, self.value_targets(batch), epochs=cfg.ppo_epochs))
        return metrics

    def backward(
        self, mini: TrainBatch, run: Tensor | None = None
    ) -> tuple[dict[str, Tensor] | None, Tensor | None]:
        """Set `.grad` to the gradient of one mini-batch's loss; no optimizer step.

        The loss is accumulated over micro-batches of the rows `run` ((B,) bool, `rows_to_run`; None: all)
        and normalised by the whole mini-batch's token and sequence counts summed over all processes.
        Returns ``(sums, logp)``: the local sums for the metrics
        (`learner_metrics.SUMS`), or None when the whole mini-batch (on every
        process) holds no policy token; and, when `mini` carries no π_old, the
        training forward's own log-probs, detached, (B, L-1) on the CPU (0 on the rows not run): they
        served as π_old (on-policy, see `reuses_training_forward`), else None.
        """
        cfg, acc = self.config, self.accelerator
        norm = Normaliser.of(mini, cfg, acc)
        if norm is None:
            return None, None
        self.optimizer.zero_grad(set_to_none=True)
        sums = zero_sums(acc.device)
        own_old = mini.old_logprobs is None  # on-policy: π_old is this forward
        old_pieces: list[Tensor] = []
        run = torch.ones(len(mini), dtype=torch.bool) if run is None else run
        sums["rows"] += len(mini)
        sums["rows_skipped"] += int((~run).sum())
        micro = split_batch(mini.select(run), cfg.micro_batch_size)
        self.model.train()
        for k, mb in enumerate(micro):
            mb = mb.to(acc.device)
            sync = k == len(micro) - 1  # reduce gradients across processes once, at the end
            with self._gradient_sync(sync):
                logp, entropy = self._forward(self.model, mb, entropy=True, entropy_grad=cfg.entropy_coef > 0)
                if own_old:
                    mb.old_logprobs = logp.detach() * (mb.attention_mask[:, 1:] > 0)
                    old_pieces.append(mb.old_logprobs.cpu())
                assert entropy is not None  # asked for
                loss = micro_batch_loss(mb, logp, entropy, norm, cfg, self.policy_loss_fn, self.kl_fn, sums)
                acc.backward(loss * acc.num_processes)  # DDP averages; our normaliser is global
        if not own_old:
            return sums, None
        logp_all = torch.zeros(mini.loss_mask.shape)
        logp_all[run] = stack_rows(old_pieces, logp_all[run].shape)
        return sums, logp_all

    def _gradient_sync(self, sync: bool) -> contextlib.AbstractContextManager[Any]:
        """Reduce the gradients over the processes in this backward (`sync`), or only accumulate them."""
        if self.fsdp:
            fsdp.set_gradient_sync(self.model, sync)
            return contextlib.nullcontext()
        return contextlib.nullcontext() if sync else self.accelerator.no_sync(self.model)

    def _step(self, signal: bool) -> Tensor | None:
        """Clip the global gradient norm (`max_grad_norm`), take one AdamW step; the norm before clipping.

        A mini-batch without `signal` (`has_signal`: every group flat, no KL, entropy or NLL term) takes
        no step and returns None: AdamW would still move every weight along the moments earlier batches
        left, by about 0.67 × lr on the first such step and 3.6 × lr over twelve, with no evidence behind
        it. Unlike verl, TRL and CleanRL, which step on every mini-batch; like them, a mini-batch with signal
        steps even when clipping zeroed its gradient (docs/design.md, Learners). All processes agree.
        """
        if not signal:
            self.optimizer.zero_grad(set_to_none=True)
            return None
        max_norm = self.config.max_grad_norm or math.inf
        if self.fsdp:  # the gradients live on the optimizer's shards, not on the gathered weights
            shards = [p for group in self.optimizer.param_groups for p in group["params"]]
            norm = fsdp.clip_grad_norm(shards, max_norm)
        else:
            norm = self.accelerator.clip_grad_norm_(self.model.parameters(), max_norm)
        norm = torch.as_tensor(norm, dtype=torch.float32).detach().cpu()
        if self.config.lr_warmup_steps:
            for group in self.optimizer.param_groups:
                group["lr"] = warmup_lr(
                    self.config.lr, self.config.lr_warmup_steps, steps_taken(self.optimizer)
                )
        with self.grid.stepping() if self.grid is not None else contextlib.nullcontext():
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.fsdp:
            fsdp.refresh(self.model)
        return norm

    def _num_minibatches(self, n: int) -> int:
        """`num_minibatches`, or fewer when a process holds fewer trajectories (a small dynamic-sampling
        draw, a tiny recipe): every process takes the same count, that of the smallest share."""
        smallest = int(self.accelerator.gather(torch.tensor([n], device=self.accelerator.device)).min())
        return max(1, min(self.config.num_minibatches, smallest))

    def value_targets(self, batch: TrainBatch) -> Tensor:
        """The critic's targets: GAE returns with λ_critic (1: Monte-Carlo), (B, L-1)."""
        values = batch.values if batch.values is not None else torch.zeros_like(batch.loss_mask)
        assert batch.token_rewards is not None  # make_batch places every reward on its tokens
        _, returns = gae(
            batch.token_rewards, values, batch.loss_mask, self.config.gamma, self.config.lam_critic
        )
        return returns


def steps_taken(optimizer: torch.optim.Optimizer) -> int:
    """The optimizer steps taken so far, from AdamW's own per-weight count: a resumed run's loaded optimizer
    state carries it, so a warm-up goes on where it stopped."""
    counts = [float(state["step"]) for state in optimizer.state.values() if "step" in state]
    return int(max(counts, default=0))


def warmup_lr(lr: float, warmup_steps: int, taken: int) -> float:
    """The lr of the step after `taken` steps: (taken + 1) / warmup_steps × lr until the warm-up ends."""
    return lr * min(1.0, (taken + 1) / warmup_steps)
