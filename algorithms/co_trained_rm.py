"""A reward model trained alongside the policy (CoRLHF-style co-training) with a label budget: ``reward_model``.

A learned reward model fit once drifts off the policy's distribution as the policy moves. Here the
model, AgentPRM's classifier (`argym.rewards.prm.build_classifier`: a small transformer with a scalar
head, BCE against the outcome), is refit every ``reward.reward_model.refit_every`` steps on the *current*
policy's samples: at a refit step it reads the verified outcome of ``label_fraction`` of the step's
samples (drawn at random), never more than ``label_budget`` outcomes in the whole run, and refits on
every outcome read so far. A sample's reward is the model's P(correct | conversation) in [0, 1].

Beside it, the same model frozen after its first fit is kept, so each step logs both models'
accuracy on the step's fresh samples (before any refit on them: labels there only measure):
``reward_model/accuracy`` and ``reward_model/frozen_accuracy``, with ``reward_model/labels_used``,
``reward_model/refits``. ``refit_every: 0`` trains the policy on the frozen model itself (the
comparison arm at the same budget).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from argym.rewards.compose import RewardContext, register_reward
from argym.rewards.label_free_config import RewardModelConfig
from argym.rewards.prm import ClassifierPRM, build_classifier, train_classifier
from argym.rewards.steps import render_text
from argym.types import Trajectory


class CoTrainedRewardModel:
    """The ``reward_model`` component: scores with a classifier refit on schedule within a label budget.

    Every verified outcome the model trains on is read through `_read_label`, which counts it
    (`labels_used`) and refuses to go past the budget; `examples` holds exactly those outcomes.
    """

    def __init__(self, tokenizer: Any, config: RewardModelConfig, max_positions: int = 512):
        self.config = config
        self.model: ClassifierPRM = build_classifier(
            tokenizer,
            hidden_size=config.hidden_size,
            num_layers=config.num_layers,
            num_heads=max(1, config.hidden_size // 16),
            max_positions=max_positions,
            seed=config.seed,
        )
        self.frozen: ClassifierPRM | None = None
        """The model as it was after its first fit."""
        self.rng = np.random.default_rng(config.seed)
        self.calls = 0
        self.refits = 0
        self.labels_used = 0
        self.texts: list[str] = []
        self.targets: list[float] = []
        self._report: dict[str, float] = {}

    def due(self) -> bool:
        """Whether this call (step) refits: the first one, then every `refit_every` (never, if 0)."""
        every = self.config.refit_every
        return self.refits == 0 or (every > 0 and self.calls % every == 0)

    def _read_label(self, traj: Trajectory) -> float:
        """The verified outcome of one sample, counted against the budget."""
        if self.labels_used >= self.config.label_budget:
            raise RuntimeError("the reward model's label budget is spent")  # `_refit` never asks past it
        self.labels_used += 1
        return 1.0 if traj.success else 0.0

    def _refit(self, trajs: list[Trajectory], texts: list[str]) -> None:
        left = self.config.label_budget - self.labels_used
        k = min(left, math.ceil(self.config.label_fraction * len(trajs)))
        if k <= 0:
            return
        for i in sorted(self.rng.choice(len(trajs), size=k, replace=False).tolist()):
            self.targets.append(self._read_label(trajs[i]))
            self.texts.append(texts[i])
        c = self.config
        train_classifier(
            self.model,
            self.texts,
            self.targets,
            epochs=c.epochs,
            lr=c.lr,
            batch_size=c.batch_size,
            seed=c.seed + self.refits,
        )
        self.refits += 1
        if self.frozen is None:
            self.frozen = ClassifierPRM(
                copy.deepcopy(self.model.model), self.model.tokenizer, self.model.max_length
            )

    def __call__(self, trajectories: Sequence[Trajectory]) -> list[float]:
        trajs = list(trajectories)
        texts = [render_text(t.messages) for t in trajs]
        report: dict[str, float] = {}
        if self.frozen is not None and trajs:  # measured on fresh samples, before any refit on them
            outcome = [t.success for t in trajs]
            report["reward_model/accuracy"] = _accuracy(self.model.probabilities(texts), outcome)
            report["reward_model/frozen_accuracy"] = _accuracy(self.frozen.probabilities(texts), outcome)
        if trajs and self.due():
            self._refit(trajs, texts)
        self.calls += 1
        scores = self.model.probabilities(texts) if trajs else []
        report.update(
            {
                "reward_model/labels_used": float(self.labels_used),
                "reward_model/budget_left": float(self.config.label_budget - self.labels_used),
                "reward_model/refits": float(self.refits),
            }
        )
        self._report = report
        return scores

    def report(self) -> dict[str, float]:
        return dict(self._report)


def _accuracy(probabilities: list[float], outcome: list[bool]) -> float:
    return sum((p > 0.5) == y for p, y in zip(probabilities, outcome)) / len(outcome)


@register_reward("reward_model")
def _reward_model(context: RewardContext) -> CoTrainedRewardModel:
    cfg = context.config
    return CoTrainedRewardModel(
        context.policy.tokenizer, cfg.reward.reward_model, cfg.rollout.max_total_tokens
    )
