"""Co-rewarding-II's teacher (arXiv 2508.00410 §3.3): a slowly updated copy of the policy, an EMA of its weights.

θ_T ← d · θ_T + (1 − d) · θ after each policy update, starting from the policy's own weights, so the
teacher's pseudo-labels move only as fast as d lets them: the policy cannot chase its own latest
answers, the self-consistent illusion that makes plain majority vote collapse. Buffers (rotary
tables, running statistics) are copied, not averaged. The teacher decodes greedily
(`PseudoLabelReward` in argym.algorithms.pseudo_labels reads its answer as the label).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn


class EMATeacher:
    """An exponential moving average of a model's parameters, held apart (no grad, eval mode)."""

    def __init__(self, model: nn.Module, decay: float):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}.")
        self.decay = decay
        self.model: Any = copy.deepcopy(model).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.updates = 0
        """How many times the teacher has moved toward the student."""

    @torch.no_grad()
    def update(self, student: nn.Module) -> None:
        """θ_T ← d · θ_T + (1 − d) · θ_student, parameter by parameter (same names as at the copy)."""
        params = dict(student.named_parameters())
        for name, p in self.model.named_parameters():
            p.mul_(self.decay).add_(params[name].detach().to(p.device, p.dtype), alpha=1.0 - self.decay)
        buffers = dict(student.named_buffers())
        for name, b in self.model.named_buffers():
            if name in buffers:
                b.copy_(buffers[name])
        self.updates += 1
