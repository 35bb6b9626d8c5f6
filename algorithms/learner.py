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
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from argym.algorithms.advantages import ADVANTAGES, AdvantageInputs, gae, group_moments, masked_whiten
from argym.algorithms.batch import TrainBatch, make_batch, split_batch
from argym.algorithms.losses import AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES, aggregate, nll_loss
from argym.algorithms.prefix import place, plan_shared_prefix, shared_prefix_logits
from argym.algorithms.r3l.credit import credit_step
from torch import Tensor, nn

from argym.errors import ConfigError
from argym.types import Trajectory

if TYPE_CHECKING:
    from accelerate import Accelerator
    from argym.algorithms.value import Critic


@dataclass
class LearnerConfig:
    """Settings of the learner's parts; a named algorithm is an instance of this."""

    lr: float = 1e-6
    """AdamW learning rate (1e-6 in DeepSeekMath arXiv 2402.03300, DAPO, TRL and verl)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay (DAPO's verl recipe uses 0.1)."""
    policy_loss: str = "ppo_clip"
    """Registered policy loss (`argym.algorithms.losses.POLICY_LOSSES`)."""
    clip_low: float = 0.2
    """ε_low: the ratio is clipped below at 1 − ε_low (PPO arXiv 1707.06347)."""
    clip_high: float = 0.2
    """ε_high: clipped above at 1 + ε_high; DAPO's clip-higher uses 0.28 (arXiv 2503.14476)."""
    dual_clip: float | None = None
    """Dual-clip c > 1 bounding the loss of negative-advantage tokens (arXiv 1912.09729; verl 3.0); None: off."""
    loss_agg: str = "seq-mean-token-mean"
    """Loss aggregation: token-mean | seq-mean-token-mean (GRPO) | seq-mean-token-sum | seq-mean-token-sum-norm."""
    loss_agg_constant: float | None = None
    """Constant C of seq-mean-token-sum-norm, e.g. the max generation length (Dr.GRPO arXiv 2503.20783)."""
    kl_coef: float = 0.0
    """β of the KL-to-reference loss term (GRPO used 0.04, R1 0.001); 0 needs no reference model."""
    kl_estimator: str = "k3"
    """Per-token KL estimator: k1 | k2 | k3 (GRPO's, arXiv 2402.03300 eq. 4)."""
    kl_in_reward: bool = False
    """Put the KL in the reward instead of the loss: r_i − β Σ_t KL_t before the advantages (RLOO, REINFORCE++)."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus subtracted from the loss; 0 logs entropy without training on it."""
    nll_coef: float = 0.0
    """μ of the LM loss on successful samples added to the loss (VAPO, arXiv 2504.05118 eq. 8: 0.1)."""
    num_minibatches: int = 1
    """Optimizer steps per epoch: the rollout batch is split into this many mini-batches."""
    ppo_epochs: int = 1
    """Passes over the rollout batch (μ in GRPO; TRL's num_iterations)."""
    micro_batch_size: int = 64
    """Sequences per forward/backward; only memory depends on it, never the gradient."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this; None: no clipping (the norm is still logged)."""
    temperature: float = 1.0
    """Sampling temperature: log-probs are computed from logits / T, matching the sampler."""
    advantage: str = "grpo"
    """Registered advantage estimator (`argym.algorithms.advantages.ADVANTAGES`)."""
    adv_std: bool = True
    """Divide group-centred rewards by the group std (GRPO); False for Dr.GRPO (arXiv 2503.20783)."""
    adv_eps: float = 1e-6
    """ε added to the group std (verl 1e-6; TRL 1e-4)."""
    gamma: float = 1.0
    """Discount of token-level returns (`advantage: returns`); 1 in REINFORCE++, VAPO and PURE."""
    adv_baseline: bool = True
    """`advantage: returns`: subtract the group's mean return (False: raw returns)."""
    lam_policy: float = 0.95
    """GAE λ of the actor's advantages: fixed when `lam_alpha` is 0, else the floor of the length-adaptive
    λ (VC-PPO's 0.95, arXiv 2503.01491), so answers shorter than 1/(α(1 − λ)) = 400 tokens keep 0.95."""
    lam_alpha: float = 0.05
    """α of VAPO's length-adaptive λ_policy = max(1 − 1/(α·l), lam_policy) (arXiv 2504.05118 eq. 7, α = 0.05);
    0: fixed `lam_policy`. Without the floor, λ ≤ 0 for l ≤ 1/α = 20 tokens and Â_t = δ_t only."""
    lam_critic: float = 1.0
    """GAE λ of the critic's targets; 1 gives Monte-Carlo returns (VAPO's decoupled GAE)."""
    value_lr_scale: float = 2.0
    """Critic AdamW learning rate as a multiple of the actor's `lr` (VAPO arXiv 2504.05118 §4.1: critic 2e-6,
    actor 1e-6), so a recipe's lr moves both and the critic never runs slower than the paper has it."""
    value_clip: float | None = 0.2
    """Clip of the value update around the old values (PPO's clipped value loss); None: off."""
    value_pretrain_steps: int = 50
    """Critic steps on Monte-Carlo returns of the initial policy before any policy update (VAPO §3.1)."""
    share_prompt_forward: bool = True
    """Run each group's shared prompt once per micro-batch and reuse its key/value cache for the
    group's samples (algorithms/prefix.py); same log-probs and gradients, fewer tokens."""
    amplify_alpha: float | None = None
    """R³L's positive amplification at step 5 (arXiv 2601.03715): Â := 1 on successes, α·Â on other
    non-negative advantages, negatives unchanged; the paper's α is 3. None: off."""
    tis_cap: float | None = None
    """Truncated importance weight min(π_old/μ, C) on each token's advantage, μ the sampler's
    log-prob (R³L retries were sampled with guidance in context); None: off."""
    shuffle: bool = True
    """Shuffle trajectories into mini-batches each epoch (seeded by `seed`)."""
    seed: int = 0
    """Seed of the mini-batch shuffling."""

    def __post_init__(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ConfigError(f"LearnerConfig: {msg}")

        need(self.lr > 0, f"lr must be > 0, got {self.lr}; try 1e-6.")
        need(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}.")
        need(0 <= self.clip_low < 1, f"clip_low must be in [0, 1), got {self.clip_low}; PPO uses 0.2.")
        need(self.clip_high >= 0, f"clip_high must be >= 0, got {self.clip_high}; PPO uses 0.2, DAPO 0.28.")
        need(
            self.dual_clip is None or self.dual_clip > 1,
            f"dual_clip must be None or > 1, got {self.dual_clip}; verl uses 3.0.",
        )
        need(self.kl_coef >= 0, f"kl_coef must be >= 0, got {self.kl_coef}.")
        need(self.entropy_coef >= 0, f"entropy_coef must be >= 0, got {self.entropy_coef}.")
        need(self.nll_coef >= 0, f"nll_coef must be >= 0, got {self.nll_coef}; VAPO uses 0.1.")
        need(0 <= self.gamma <= 1, f"gamma must be in [0, 1], got {self.gamma}.")
        for name in ("lam_policy", "lam_critic"):
            need(0 <= getattr(self, name) <= 1, f"{name} must be in [0, 1], got {getattr(self, name)}.")
        need(self.lam_alpha >= 0, f"lam_alpha must be >= 0 (0: fixed lam_policy), got {self.lam_alpha}.")
        need(
            self.value_lr_scale > 0,
            f"value_lr_scale must be > 0, got {self.value_lr_scale}; VAPO uses 2 "
            "(critic lr = value_lr_scale × lr).",
        )
        need(
            self.value_pretrain_steps >= 0,
            f"value_pretrain_steps must be >= 0, got {self.value_pretrain_steps}.",
        )
        for name in ("num_minibatches", "ppo_epochs", "micro_batch_size"):
            need(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}.")
        need(
            self.max_grad_norm is None or self.max_grad_norm > 0,
            f"max_grad_norm must be > 0 or None (no clipping), got {self.max_grad_norm}.",
        )
        need(self.temperature > 0, f"temperature must be > 0 (the sampler's), got {self.temperature}.")
        need(self.adv_eps >= 0, f"adv_eps must be >= 0, got {self.adv_eps}.")
        need(
            self.amplify_alpha is None or self.amplify_alpha > 0,
            f"amplify_alpha must be > 0 or None (off), got {self.amplify_alpha}; R³L uses 3.",
        )
        need(
            self.tis_cap is None or self.tis_cap > 0,
            f"tis_cap must be > 0 or None (off), got {self.tis_cap}.",
        )
        ADVANTAGES.get(self.advantage)  # raises ConfigError with "did you mean"
        POLICY_LOSSES.get(self.policy_loss)
        KL_ESTIMATORS.get(self.kl_estimator)
        AGGREGATIONS.get(self.loss_agg)
        if self.loss_agg == "seq-mean-token-sum-norm":
            need(
                self.loss_agg_constant is not None and self.loss_agg_constant > 0,
                "loss_agg='seq-mean-token-sum-norm' needs loss_agg_constant > 0, "
                "e.g. the max generation length in tokens (Dr.GRPO).",
            )


class Learner:
    """Policy-gradient updates of `model` from trajectories, through an `Accelerator`.

    Builds AdamW over the trainable parameters and `accelerator.prepare`s model
    and optimizer (so build the Accelerator with gradient_accumulation_steps=1:
    the learner accumulates micro-batches itself). `ref_model` is required when
    ``config.kl_coef > 0``; it is frozen and prepared for evaluation.

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
        self.accelerator = accelerator
        disable_dropout(model)
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=config.lr, weight_decay=config.weight_decay
        )
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.ref_model = None
        if ref_model is not None:
            ref_model.requires_grad_(False)
            self.ref_model = accelerator.prepare_model(ref_model, evaluation_mode=True)
        self.critic = critic  # VAPO's value model (advantage "gae"); trained after each policy update
        self.advantage_fn = ADVANTAGES.get(config.advantage)
        self.policy_loss_fn = POLICY_LOSSES.get(config.policy_loss)
        self.kl_fn = KL_ESTIMATORS.get(config.kl_estimator)
        self._shuffle_gen = torch.Generator().manual_seed(config.seed)

    # ----------------------------------------------------------------------- forward

    def _forward(
        self, model: nn.Module, mb: TrainBatch, entropy: bool = False, entropy_grad: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Log-prob of each target token and (if asked) the policy's entropy there, (b, l-1).

        log π(y_t) = z_{y_t}/T − logsumexp(z/T), in float32. The entropy
        H = logsumexp(z/T) − Σ softmax(z/T)·z/T reuses the same logits, without
        grad unless `entropy_grad` (an entropy bonus is being trained).
        """
        plan = plan_shared_prefix(mb) if self._shares_prefix(model) else None
        if plan is None:
            logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits[
                :, :-1
            ]  # (b, l-1, V): position t predicts t+1
            return self._logp_entropy(logits, mb.input_ids[:, 1:], entropy, entropy_grad)
        logits, targets, columns, valid = shared_prefix_logits(model, mb, plan)  # (b, s, V)
        logp, h = self._logp_entropy(logits, targets, entropy, entropy_grad)
        width = mb.input_ids.shape[1] - 1
        return place(logp, columns, valid, width), (
            place(h, columns, valid, width) if h is not None else None
        )

    def _shares_prefix(self, model: nn.Module) -> bool:
        """Group prompts run once (algorithms/prefix.py) unless turned off or the model recomputes
        activations (gradient checkpointing keeps no key/value cache)."""
        inner = self.accelerator.unwrap_model(model)
        name = (
            "is_activation_checkpointing"
            if hasattr(type(inner), "is_activation_checkpointing")
            else "is_gradient_checkpointing"
        )  # renamed in transformers 5.24
        return self.config.share_prompt_forward and not getattr(inner, name, False)

    def _logp_entropy(
        self, logits: Tensor, targets: Tensor, entropy: bool, entropy_grad: bool
    ) -> tuple[Tensor, Tensor | None]:
        logits = logits.float() / self.config.temperature
        log_z = torch.logsumexp(logits, dim=-1)  # (b, l)
        logp = logits.gather(-1, targets[..., None]).squeeze(-1) - log_z  # (b, l)
        if not entropy:
            return logp, None
        z, lz = (logits, log_z) if entropy_grad else (logits.detach(), log_z.detach())
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            h = lz - (torch.softmax(z, dim=-1) * z).sum(dim=-1)  # (b, l)
        return logp, h

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs besides the weights: optimizer moments and the mini-batch shuffle RNG."""
        return {"optimizer": self.optimizer.state_dict(), "shuffle_rng": self._shuffle_gen.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self._shuffle_gen.set_state(state["shuffle_rng"])

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
        if not given:
            advantages = torch.zeros(len(trajectories))  # placeholder until π_old / π_ref exist
        batch = make_batch(trajectories, advantages, pad_id)
        if old_logprobs:
            batch.old_logprobs = self.logprobs(batch, minibatches=minibatches)
        if self.config.kl_coef > 0:
            batch.ref_logprobs = self.logprobs(batch, model=self.ref_model)
        if self.critic is not None:
            batch.values = self.critic.values(batch)
        if not given:
            batch.advantages = self.compute_advantages(batch)
        credit_step(batch, self.config)  # step 5: R³L's importance weight and positive amplification
        return batch

    @property
    def reuses_training_forward(self) -> bool:
        """Fully on-policy (one epoch, one mini-batch, no KL in the reward): π_old is the training
        forward's own log-probs, detached, so the separate no-grad pass is skipped (as TRL does
        when num_iterations == 1). The ratio is then exactly 1 and the gradient unchanged."""
        cfg = self.config
        return (
            cfg.ppo_epochs == 1
            and cfg.num_minibatches == 1
            and not (cfg.kl_in_reward and cfg.kl_coef > 0)
            and cfg.tis_cap is None
        )  # the importance weight needs π_old before the loss

    def compute_advantages(self, batch: TrainBatch) -> Tensor:
        """The configured estimator on `batch` (after infra failures were dropped); (B, L-1).

        With ``kl_in_reward`` the reward is first lowered by β Σ_t KL_t of the
        sampled response (π_old against π_ref), as RLOO and REINFORCE++ do.
        """
        cfg, mask = self.config, batch.loss_mask
        rewards, token_rewards = batch.rewards, batch.token_rewards
        if cfg.kl_in_reward and cfg.kl_coef > 0:
            kl = self.kl_fn(batch.old_logprobs, batch.ref_logprobs) * mask  # (B, L-1)
            rewards = rewards - cfg.kl_coef * kl.sum(-1)  # sequence-level, as TRL's RLOOTrainer
            token_rewards = token_rewards - cfg.kl_coef * kl  # per token, as REINFORCE++ eq. 5
        if self.advantage_fn.token_level:
            # the outcome baseline of REINFORCE++-baseline reads the rewards before the KL (in token_rewards)
            inputs = AdvantageInputs(batch.rewards, batch.group_ids, token_rewards, mask, batch.values)
            adv = self.advantage_fn(inputs, cfg)
            if self.advantage_fn.whiten_tokens:  # REINFORCE++: over all processes' tokens
                acc = self.accelerator
                adv = masked_whiten(
                    adv,
                    mask,
                    cfg.adv_eps,
                    reduce=lambda t: acc.reduce(t.to(acc.device), reduction="sum").cpu(),
                )
            return adv.float() * mask  # (B, L-1)
        adv = self._global_sequence_advantages(rewards, batch.group_ids).float()  # (B,)
        return adv[:, None] * mask  # (B, L-1)

    def _global_sequence_advantages(self, rewards: Tensor, group_ids: Tensor) -> Tensor:
        """The sequence-level estimator over the rewards of *all* processes, this process's rows back.

        Batch-wide statistics of a sequence-level estimator must be global, so one
        process's share of the batch gives the single-process result; group ids are made
        unique per process, since each numbers its groups from 0.
        """
        acc, cfg = self.accelerator, self.config
        if acc.num_processes == 1:
            return self.advantage_fn(AdvantageInputs(rewards, group_ids), cfg)
        n = torch.tensor([len(rewards)], device=rewards.device)
        sizes = acc.gather(n).tolist()  # (P,) rows per process
        width = max(sizes)
        r = acc.gather(acc.pad_across_processes(rewards, dim=0)).view(len(sizes), width)
        g = acc.gather(acc.pad_across_processes(group_ids, dim=0)).view(len(sizes), width)
        span = int(g.max().item()) + 1
        g = g + span * torch.arange(len(sizes), device=g.device)[:, None]  # (P, width), unique per process
        rows = [(k, i) for k, size in enumerate(sizes) for i in range(size)]
        ks, is_ = torch.tensor([k for k, _ in rows]), torch.tensor([i for _, i in rows])
        adv = self.advantage_fn(
            AdvantageInputs(r[ks, is_], g[ks, is_]), cfg
        )  # over every process's rows, in process order
        start = sum(sizes[: acc.process_index])
        return adv[start : start + len(rewards)]

    def backward_minibatch(self, mini: TrainBatch) -> dict[str, Tensor] | None:
        """Set `.grad` to the gradient of one mini-batch's loss; no optimizer step.

        The loss is accumulated over micro-batches and normalised by the
        mini-batch's token and sequence counts summed over all processes.
        Returns local sums for the metrics, or None when the whole mini-batch
        (on every process) holds no policy token.
        """
        cfg, acc = self.config, self.accelerator
        pos_tokens = (mini.loss_mask * mini.positive[:, None]).sum().item() if cfg.nll_coef > 0 else 0.0
        local = torch.tensor(
            [mini.loss_mask.sum().item(), len(mini), pos_tokens], dtype=torch.float64, device=acc.device
        )
        global_tokens, global_seqs, global_pos = acc.reduce(local, reduction="sum").tolist()
        if global_tokens == 0:
            return None
        self.optimizer.zero_grad(set_to_none=True)
        agg = dict(
            mode=cfg.loss_agg,
            global_tokens=global_tokens,
            global_seqs=global_seqs,
            constant=cfg.loss_agg_constant,
        )
        sums = {
            k: torch.zeros((), device=acc.device)
            for k in (
                "loss",
                "pg_loss",
                "kl_loss",
                "clipped",
                "approx_kl",
                "entropy",
                "kl_ref",
                "tokens",
                "nll",
            )
        }
        micro = split_batch(mini, cfg.micro_batch_size)
        self._old_pieces: list[Tensor] = []
        self.model.train()
        for k, mb in enumerate(micro):
            mb = mb.to(acc.device)
            mask = mb.loss_mask  # (b, l-1)
            sync = k == len(micro) - 1  # reduce gradients across processes once, at the end
            with contextlib.nullcontext() if sync else acc.no_sync(self.model):
                logp, entropy = self._forward(self.model, mb, entropy=True, entropy_grad=cfg.entropy_coef > 0)
                if mb.old_logprobs is None:  # on-policy: π_old is this forward (see reuses_training_forward)
                    mb.old_logprobs = logp.detach() * (mb.attention_mask[:, 1:] > 0)
                    self._old_pieces.append(mb.old_logprobs.cpu())
                pg, clipped = self.policy_loss_fn(logp, mb.old_logprobs, mb.advantages, mask, cfg)
                pg_loss = aggregate(pg, mask, **agg)
                loss = pg_loss
                if cfg.kl_coef > 0 and not cfg.kl_in_reward:
                    kl = self.kl_fn(logp, mb.ref_logprobs)  # (b, l-1)
                    kl_loss = aggregate(kl, mask, **agg)
                    loss = loss + cfg.kl_coef * kl_loss  # GRPO: KL in the loss (arXiv 2402.03300 eq. 3)
                    sums["kl_loss"] += kl_loss.detach()
                    sums["kl_ref"] += (kl.detach() * mask).sum()
                if cfg.entropy_coef > 0:
                    loss = loss - cfg.entropy_coef * aggregate(entropy, mask, **agg)
                if cfg.nll_coef > 0:  # VAPO: L = L_PPO + μ·L_NLL (arXiv 2504.05118 eq. 9)
                    nll = nll_loss(logp, mask, mb.positive, global_pos)
                    loss = loss + cfg.nll_coef * nll
                    sums["nll"] += nll.detach()
                acc.backward(loss * acc.num_processes)  # DDP averages; our normaliser is global
            with torch.no_grad():
                log_ratio = torch.where(mask > 0, logp.detach() - mb.old_logprobs, 0.0)  # (b, l-1)
                # k3 estimate of KL(π_old‖π_θ), as CleanRL's approx_kl
                sums["approx_kl"] += (torch.exp(log_ratio) - 1 - log_ratio).sum()
                sums["clipped"] += (clipped.float() * mask).sum()
                sums["entropy"] += (entropy.detach() * mask).sum()
                sums["tokens"] += mask.sum()
                sums["loss"] += loss.detach()
                sums["pg_loss"] += pg_loss.detach()
        if self._old_pieces:  # keep π_old on the batch for the metrics (training–inference mismatch)
            out = torch.zeros(mini.loss_mask.shape)
            start = 0
            for piece in self._old_pieces:
                out[start : start + len(piece), : piece.shape[1]] = piece
                start += len(piece)
            mini.old_logprobs = out
        return sums

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
        cfg, acc = self.config, self.accelerator
        n_dropped = sum(t.infra_failure for t in trajectories)
        if n_dropped == len(trajectories):
            return {"train/infra_dropped": float(n_dropped)}
        groups = torch.tensor(
            [t.group for t in trajectories if not t.infra_failure]
        )  # the batch's rows, in order
        n_minibatches = self._num_minibatches(len(groups))
        first = self._partition(groups, n_minibatches)  # epoch 1's, also π_old's path
        batch = self.prepare_batch(
            trajectories, pad_id, advantages, minibatches=first, old_logprobs=not self.reuses_training_forward
        )
        totals: dict[str, Tensor] = {}
        grad_norms: list[Tensor] = []
        for epoch in range(cfg.ppo_epochs):
            for rows in first if epoch == 0 else self._partition(groups, n_minibatches):
                mini = batch.select(rows)
                sums = self.backward_minibatch(mini)
                if batch.old_logprobs is None and mini.old_logprobs is not None:  # one mini-batch: all rows
                    batch.old_logprobs = torch.zeros_like(batch.loss_mask)
                    batch.old_logprobs[rows] = mini.old_logprobs
                if sums is None:
                    continue
                norm = acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm or math.inf)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                grad_norms.append(torch.as_tensor(norm, dtype=torch.float32).detach().cpu())
                for k, v in sums.items():
                    totals[k] = totals.get(k, 0) + v
        metrics = self._metrics(batch, totals, grad_norms)
        if self.critic is not None:  # decoupled GAE: the critic regresses on λ_critic returns (VAPO §3.2)
            metrics.update(self.critic.update(batch, self.value_targets(batch), epochs=cfg.ppo_epochs))
        return metrics

    def _num_minibatches(self, n: int) -> int:
        """`num_minibatches`, or fewer when a process holds fewer trajectories (a small dynamic-sampling
        draw, a tiny recipe): every process takes the same count, that of the smallest share."""
        smallest = int(self.accelerator.gather(torch.tensor([n], device=self.accelerator.device)).min())
        return max(1, min(self.config.num_minibatches, smallest))

    def _partition(self, groups: Tensor, n_minibatches: int) -> list[Tensor]:
        """One epoch's mini-batches as row indices: whole groups, in an order shuffled by `seed` unless
        `shuffle` is off. verl counts its mini-batch in prompts (DAPO's 512 responses = 32 prompts × 16), and a
        whole group shares its prompt forward (algorithms/prefix.py); rows are split when there are fewer
        groups than mini-batches."""
        cfg = self.config
        ids, inverse = torch.unique(groups, return_inverse=True)
        by_group = len(ids) >= n_minibatches
        units = len(ids) if by_group else len(groups)
        order = torch.randperm(units, generator=self._shuffle_gen) if cfg.shuffle else torch.arange(units)
        chunks = torch.tensor_split(order, n_minibatches)
        if not by_group:
            return list(chunks)
        return [
            torch.cat([torch.nonzero(inverse == g).flatten() for g in chunk.tolist()]) for chunk in chunks
        ]

    def value_targets(self, batch: TrainBatch) -> Tensor:
        """The critic's targets: GAE returns with λ_critic (1: Monte-Carlo), (B, L-1)."""
        values = batch.values if batch.values is not None else torch.zeros_like(batch.loss_mask)
        _, returns = gae(
            batch.token_rewards, values, batch.loss_mask, self.config.gamma, self.config.lam_critic
        )
        return returns

    # ----------------------------------------------------------------------- metrics

    def _metrics(
        self, batch: TrainBatch, totals: dict[str, Tensor], grad_norms: list[Tensor]
    ) -> dict[str, float]:
        """Reduce local sums across processes into namespaced per-token / per-step means."""
        acc, dev = self.accelerator, self.accelerator.device
        mask = batch.loss_mask  # (B, L-1)
        has = batch.has_sampler_logprobs[:, None] & (mask > 0)  # (B, L-1)
        if batch.old_logprobs is None:  # no step was taken (no policy token anywhere)
            batch.old_logprobs, has = torch.zeros_like(mask), torch.zeros_like(has)
        gap = (batch.old_logprobs - batch.sampler_logprobs).abs() * has  # (B, L-1)
        adv = batch.advantages * mask
        _, r_std, r_count, _ = group_moments(batch.rewards, batch.group_ids)  # (G,)
        names = ["loss", "pg_loss", "kl_loss", "clipped", "approx_kl", "entropy", "kl_ref", "tokens", "nll"]
        local = torch.stack(
            [totals.get(k, torch.zeros((), device=dev)).float().to(dev) for k in names]
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
                    batch.num_dropped,
                )
            ]
        )
        s = dict(
            zip(
                names + ["steps", "gap", "gap_n", "adv", "adv2", "adv_n", "gstd", "groups", "dropped"],
                acc.reduce(local, reduction="sum").tolist(),
            )
        )
        gap_max = acc.reduce(gap.max().to(dev), reduction="max").item()
        # every process takes the same optimizer steps: the reduced sum counts them `num_processes` times
        steps, tok = max(s["steps"] / acc.num_processes, 1.0), max(s["tokens"], 1.0)
        adv_mean = s["adv"] / max(s["adv_n"], 1.0)
        out = {
            "train/loss": s["loss"] / steps,
            "train/pg_loss": s["pg_loss"] / steps,
            "train/clip_frac": s["clipped"] / tok,
            "train/approx_kl": s["approx_kl"] / tok,
            "train/entropy": s["entropy"] / tok,
            "train/grad_norm": float(torch.stack(grad_norms).mean()) if grad_norms else 0.0,
            "train/adv_mean": adv_mean,
            "train/adv_std": math.sqrt(max(s["adv2"] / max(s["adv_n"], 1.0) - adv_mean**2, 0.0)),
            "train/group_reward_std": s["gstd"] / max(s["groups"], 1.0),
            "train/infra_dropped": s["dropped"],
            "train/optimizer_steps": s["steps"] / acc.num_processes,
        }
        if self.config.kl_coef > 0:
            out["train/kl_ref"] = s["kl_ref"] / tok
            out["train/kl_loss"] = s["kl_loss"] / steps
        if self.config.nll_coef > 0:
            out["train/nll_loss"] = s["nll"] / steps
        if s["gap_n"] > 0:
            out["train/logprob_mismatch_mean"] = s["gap"] / s["gap_n"]
            out["train/logprob_mismatch_max"] = gap_max
        return out


def disable_dropout(model: nn.Module) -> None:
    """Switch every dropout in `model` off: `nn.Dropout` modules (LoRA's `lora_dropout` too) and
    the attention dropout transformers' attention modules read from a float attribute in train mode.

    RL needs π_θ = π_old at equal weights (the ratio is 1 on-policy), so the policy
    and the critic train without dropout, as verl and OpenRLHF do (they set the
    model config's dropouts to 0); here the modules are changed, not the saved config.
    """
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        for name in ("attention_dropout", "dropout"):
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, 0.0)
