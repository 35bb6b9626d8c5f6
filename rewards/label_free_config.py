"""The `reward.label_free` and `reward.reward_model` sections: rewards without labels (docs/label_free.md).

Read by the components in argym.algorithms.pseudo_labels (``majority``, ``co_reward_data``,
``co_reward_teacher``) and argym.algorithms.co_trained_rm (``reward_model``); here, beside
`RewardConfig`, so that reading a recipe checks them without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from argym.errors import ConfigError

LABEL_FREE = ("majority", "co_reward_data", "co_reward_teacher", "reward_model")
"""The components that train without (or within a budget of) labels."""


@dataclass
class LabelFreeConfig:
    """Pseudo-labels (TTRL's majority vote, Co-rewarding I and II) and the collapse check."""

    ema_decay: float = 0.99
    """Co-rewarding-II teacher: θ_T ← d·θ_T + (1 − d)·θ after every policy update (arXiv 2508.00410 §3.3)."""
    collapse_window: int = 5
    """Steps per window of the collapse check: the last window is compared with the one before it."""
    collapse_drop: float = 0.1
    """Flag a collapse when pseudo-label accuracy fell by at least this while the vote's share did not fall."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.ema_decay < 1.0:
            raise ConfigError(
                f"reward.label_free.ema_decay must be in [0, 1), got {self.ema_decay}; 1 would never update the "
                "teacher (0.99 is the default)."
            )
        if self.collapse_window < 1:
            raise ConfigError(f"reward.label_free.collapse_window must be >= 1, got {self.collapse_window}.")
        if not 0.0 < self.collapse_drop <= 1.0:
            raise ConfigError(f"reward.label_free.collapse_drop must be in (0, 1], got {self.collapse_drop}.")


@dataclass
class RewardModelConfig:
    """The ``reward_model`` component: a classifier refit on the policy's own samples (CoRLHF)."""

    refit_every: int = 5
    """Steps between refits on the current policy's samples; 0: fit once, at the first step, then frozen."""
    label_fraction: float = 0.1
    """Share of a refit step's samples whose verified outcome is read and trained on."""
    label_budget: int = 256
    """Most verified outcomes the model reads over the whole run (counted; never exceeded)."""
    epochs: int = 3
    """Passes over every label read so far at each refit."""
    lr: float = 1e-3
    """AdamW learning rate of the small classifier."""
    batch_size: int = 32
    """Examples per classifier step."""
    hidden_size: int = 64
    """Width of the classifier (a small Qwen2 with a scalar head, `argym.rewards.prm.build_classifier`)."""
    num_layers: int = 2
    """Layers of the classifier."""
    seed: int = 0
    """Seeds the classifier's init, the choice of labelled samples and the shuffling."""

    def __post_init__(self) -> None:
        if self.refit_every < 0:
            raise ConfigError(f"reward.reward_model.refit_every must be >= 0, got {self.refit_every}.")
        if not 0.0 < self.label_fraction <= 1.0:
            raise ConfigError(
                f"reward.reward_model.label_fraction must be in (0, 1], got {self.label_fraction}."
            )
        if self.label_budget < 1:
            raise ConfigError(
                f"reward.reward_model.label_budget must be >= 1, got {self.label_budget}: the model needs "
                "some verified outcomes to fit."
            )
        if self.epochs < 1 or self.batch_size < 1 or self.hidden_size < 4 or self.num_layers < 1:
            raise ConfigError(
                "reward.reward_model: epochs, batch_size, num_layers >= 1 and hidden_size >= 4."
            )


def check_label_free(run: Any) -> None:
    """Refuse a run (a `TrainConfig`) whose label-free components would see labels anyway or miss what they
    need: checked when the recipe is read, before any model is built."""
    for name in (n for n in run.reward.weights if n in LABEL_FREE):
        if run.sampling.dynamic:
            raise ConfigError(
                f"reward component {name!r} trains without labels, but sampling.dynamic=true keeps groups by "
                "their verified outcome; set sampling.dynamic=false."
            )
        if int(run.env.kwargs.get("max_attempts", 1)) > 1:
            raise ConfigError(
                f"reward component {name!r} trains without labels, but max_attempts > 1 tells the policy when "
                "an answer was wrong; set env.kwargs.max_attempts=1."
            )
    if "co_reward_data" in run.reward.weights and run.rollout.strategy != "paired":
        raise ConfigError(
            "reward component 'co_reward_data' labels a question with its rephrasing's vote and needs both in "
            f"one step: set rollout.strategy=paired (it is {run.rollout.strategy!r})."
        )
    if "co_reward_teacher" in run.reward.weights and run.env.kwargs.get("answer_format", "boxed") != "boxed":
        raise ConfigError(
            "co_reward_teacher reads the teacher's boxed answer; set env.kwargs.answer_format=boxed."
        )
