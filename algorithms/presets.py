"""The named algorithms as config instances of the one learner (never subclasses).

Each preset is a `LearnerConfig` plus a `SamplingConfig` with its paper's
defaults (its `paper` field names the source). From Python::

    from argym.algorithms.presets import DAPO
    learner = Learner(model, DAPO.learner, accelerator)

From a recipe or the command line: ``argym train configs/grpo_math.yaml algo=dapo``
(or ``algo: dapo`` in a YAML file). Applied to a recipe, a preset sets the
algorithm, not the scale: the recipe's `SCALE_FIELDS` (learning rate, micro-batch,
...) are kept, since the papers' values (lr 1e-6) are for 7B–32B models, not
for the tiny CPU model. The number of optimizer steps per rollout
(`num_minibatches`, `ppo_epochs`) is part of the algorithm, not of the scale:
with one mini-batch and one epoch the ratio is exactly 1 and clip-higher,
dual-clip and GSPO's sequence clip never act, so each preset sets its paper's.
The order in which config sources apply is `argym.algorithms.config.load_config`'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from argym.algorithms.learner_config import LearnerConfig
from argym.algorithms.sampling import SamplingConfig
from argym.registry import Registry

SCALE_FIELDS = ("lr", "micro_batch_size", "temperature", "seed", "shuffle", "max_grad_norm")
"""LearnerConfig fields a preset leaves to the recipe (they depend on model and batch size). AdamW's
decoupled weight decay is not one: it shrinks each weight by lr × weight_decay a step, so it scales with
the recipe's lr already, and a preset's value (DAPO's 0.1) is written like its other fields."""


@dataclass(frozen=True)
class Preset:
    """A named algorithm: the learner's parts and DAPO-style sampling, with its source."""

    name: str
    """The `algo=` name."""
    paper: str
    """arXiv id of the paper whose defaults these are."""
    learner: LearnerConfig
    """The learner's parts and the paper's hyper-parameters."""
    sampling: SamplingConfig = dataclasses.field(default_factory=SamplingConfig)
    """Dynamic sampling and overlong punishment."""
    agg_constant_is_max_tokens: bool = False
    """Use the recipe's `rollout.max_new_tokens` as the seq-mean-token-sum-norm constant (Dr.GRPO):
    a recipe leaves `loss_agg_constant` null and `load_config` derives it after every source applied."""

    def apply(self, data: dict[str, Any]) -> None:
        """Write this preset into a TrainConfig dict (`load_config`'s), keeping the scale fields."""
        algo = data.setdefault("algorithm", {})
        for f in dataclasses.fields(LearnerConfig):
            if f.name not in SCALE_FIELDS:
                algo[f.name] = getattr(self.learner, f.name)
        if self.agg_constant_is_max_tokens:
            algo["loss_agg_constant"] = None  # derived from rollout.max_new_tokens once all sources applied
        data["sampling"] = dataclasses.asdict(self.sampling)


# The papers' defaults. lr 1e-6 throughout except where noted. Optimizer steps per rollout
# (num_minibatches × ppo_epochs) are each paper's: the rollout batch over its training mini-batch.
GRPO = Preset(
    "grpo",
    "2402.03300",
    LearnerConfig(
        advantage="grpo",
        adv_std=True,
        policy_loss="ppo_clip",
        clip_low=0.2,
        clip_high=0.2,
        loss_agg="seq-mean-token-mean",
        kl_coef=0.04,
        kl_estimator="k3",  # DeepSeekMath §4.1, eq. 3
        num_minibatches=1,
        ppo_epochs=1,
    ),
)  # §4.2: a single policy update per exploration stage

DRGRPO = Preset(
    "drgrpo",
    "2503.20783",
    LearnerConfig(
        advantage="drgrpo",
        adv_std=False,
        policy_loss="ppo_clip",
        clip_low=0.2,
        clip_high=0.2,
        loss_agg="seq-mean-token-sum-norm",
        loss_agg_constant=1024.0,
        kl_coef=0.0,
    ),  # eq. 2, C = max length
    agg_constant_is_max_tokens=True,
)

DAPO = Preset(
    "dapo",
    "2503.14476",
    LearnerConfig(
        advantage="grpo",
        adv_std=True,
        policy_loss="ppo_clip",
        clip_low=0.2,
        clip_high=0.28,  # eq. 10
        dual_clip=10.0,  # verl's DAPO recipe clip_ratio_c=10
        loss_agg="token-mean",  # eq. 12
        kl_coef=0.0,  # §2.3
        weight_decay=0.1,  # not the paper's (§4.1 names AdamW, lr 1e-6, no decay): verl's DAPO recipe script
        num_minibatches=16,
    ),  # §4.1: 512 prompts × 16 samples per rollout, mini-batch 512 responses: 16 steps
    SamplingConfig(dynamic=True, max_draws=10, overlong=True),
)  # eq. 11, eq. 13

VAPO = Preset(
    "vapo",
    "2504.05118",
    LearnerConfig(
        advantage="gae",
        policy_loss="ppo_clip",
        clip_low=0.2,
        clip_high=0.28,
        loss_agg="token-mean",
        kl_coef=0.0,
        nll_coef=0.1,
        gamma=1.0,  # §3: decoupled + length-adaptive GAE, clip-higher, NLL μ=0.1
        value_lr_scale=2.0,  # §4.1: critic lr 2e-6 against the actor's 1e-6
        num_minibatches=16,
    ),
)  # §4.1: batch 8,192 responses, mini-batch 512: 16 steps per rollout

GSPO = Preset(
    "gspo",
    "2507.18071",
    LearnerConfig(
        advantage="grpo",
        adv_std=True,
        policy_loss="gspo",
        clip_low=3e-4,
        clip_high=4e-4,  # §5.1
        loss_agg="seq-mean-token-mean",
        kl_coef=0.0,
        num_minibatches=4,
    ),
)  # §5.1: each rollout batch is partitioned into 4 mini-batches for the updates

RLOO = Preset(
    "rloo",
    "2402.14740",
    LearnerConfig(
        advantage="rloo",
        policy_loss="ppo_clip",
        clip_low=0.2,
        clip_high=0.2,
        loss_agg="token-mean",
        kl_coef=0.05,
        kl_estimator="k1",
        kl_in_reward=True,
    ),
)  # TRL RLOOTrainer: β 0.05, k1 sum in the reward

REINFORCEPP = Preset(
    "reinforce++",
    "2501.03262",
    LearnerConfig(
        advantage="reinforce++_baseline",
        policy_loss="ppo_clip",
        clip_low=0.2,
        clip_high=0.2,
        loss_agg="token-mean",
        kl_coef=0.001,
        kl_estimator="k2",
        kl_in_reward=False,
    ),
)  # §3.2: baseline variant for RLVR, k2 KL loss

PRESETS: Registry[Preset] = Registry("algorithm preset")
"""The `algo=` names; `register_preset(Preset(...))` adds one from user code."""


def register_preset(preset: Preset) -> Preset:
    """File `preset` under its name (``algo: NAME``); returns it."""
    return PRESETS.add(preset.name, preset)


for _preset in (GRPO, DRGRPO, DAPO, VAPO, GSPO, RLOO, REINFORCEPP):
    register_preset(_preset)

ALIASES = {
    "dr_grpo": "drgrpo",
    "dr.grpo": "drgrpo",
    "reinforcepp": "reinforce++",
    "reinforce_pp": "reinforce++",
}


def get_preset(name: str) -> Preset:
    """The preset called `name` (case-insensitive, or one of `ALIASES`); unknown names list the close matches."""
    key = ALIASES.get(name.lower(), name.lower())
    return PRESETS.get(key if key in PRESETS else name)
