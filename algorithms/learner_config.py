"""The learner's configuration (the `algorithm` section of a recipe): a plain dataclass, no torch.

Its parts (estimator, loss, KL, aggregation) are checked by name against
`argym.algorithms.registry`, whose implementations load on first use, so reading a
recipe never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from argym.algorithms.registry import ADVANTAGES, AGGREGATIONS, KL_ESTIMATORS, POLICY_LOSSES
from argym.errors import ConfigError


@dataclass
class LearnerConfig:
    """Settings of the learner's parts; a named algorithm is an instance of this."""

    lr: float = 1e-6
    """AdamW learning rate (1e-6 in DeepSeekMath arXiv 2402.03300, DAPO, TRL and verl)."""
    lr_warmup_steps: int = 0
    """Optimizer steps over which the lr rises linearly to `lr` (step k of N at k/N × lr); 0: `lr` from the
    first step. AdamW's first steps move every weight by about the lr whatever its gradient's size (the
    moments have no history yet); verl (`lr_warmup_steps`) and OpenRLHF (`lr_warmup_ratio`) ramp them."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay; an algorithm field, which a preset sets (DAPO: 0.1, verl's DAPO recipe)."""
    policy_loss: str = "ppo_clip"
    """Registered policy loss (`argym.algorithms.registry.POLICY_LOSSES`)."""
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
    """Registered advantage estimator (`argym.algorithms.registry.ADVANTAGES`)."""
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
    skip_zero_advantage_rows: bool = False
    """Leave out of the training forward and backward every row whose advantage is 0 on each of its policy
    tokens (a flat group's, under a group-relative estimator) and that VAPO's NLL does not train on: every
    registered policy loss is 0 with its advantage, so such a row adds exactly 0 to the loss and its gradient,
    and the loss's normaliser still counts it: the same gradient (up to summation order) for less work. A KL
    term in the loss or an entropy bonus keeps every row. `train/clip_frac`, `approx_kl` and `entropy` then
    cover the rows that ran (absent when none ran), `train/rows_skipped` says how many did not. Not under
    FSDP, whose processes must run the same forwards."""
    amplify_alpha: float | None = None
    """R³L's positive amplification at step 5 (arXiv 2601.03715): Â := 1 on successes, α·Â on other
    non-negative advantages, negatives unchanged; the paper's α is 3. None: off."""
    tis_cap: float | None = None
    """Truncated importance weight min(π_old/μ, C) on each token's advantage, μ the sampler's
    log-prob (R³L retries were sampled with guidance in context); None: off."""
    fsdp: bool = False
    """On several processes, shard gradients and AdamW state over them with FSDP2 (algorithms/fsdp.py)
    instead of replicating them (DDP); the weights stay whole for generation. Ignored in one process."""
    shuffle: bool = True
    """Shuffle trajectories into mini-batches each epoch (seeded by `seed`)."""
    seed: int = 0
    """Seed of the mini-batch shuffling."""

    def __post_init__(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ConfigError(f"LearnerConfig: {msg}")

        need(self.lr > 0, f"lr must be > 0, got {self.lr}; try 1e-6.")
        need(
            self.lr_warmup_steps >= 0, f"lr_warmup_steps must be >= 0 (0: none), got {self.lr_warmup_steps}."
        )
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
        ADVANTAGES.check(self.advantage)  # raises ConfigError with "did you mean"
        POLICY_LOSSES.check(self.policy_loss)
        KL_ESTIMATORS.check(self.kl_estimator)
        AGGREGATIONS.check(self.loss_agg)
        if self.loss_agg == "seq-mean-token-sum-norm":
            need(
                self.loss_agg_constant is not None and self.loss_agg_constant > 0,
                "loss_agg='seq-mean-token-sum-norm' needs loss_agg_constant > 0, "
                "e.g. the max generation length in tokens (Dr.GRPO).",
            )
