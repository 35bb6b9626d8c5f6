"""R³L: reflect on a failed trajectory, retry from the failure point, train on the distilled retry.

Shi et al. 2026, "R³L: Reflect-then-Retry Reinforcement Learning" (arXiv 2601.03715;
code: shiweijiezero/R3L on Trinity-RFT). Two parts:

**Rollout strategy** (`R3LRollout`). Per task, half the group are ordinary
rollouts (recorded with an env snapshot before every turn). Each failed one
gets a reflection: a summary, the root cause, `retry_from_step` (the earliest
turn where it went wrong) and a suggestion, parsed from JSON with a clean
fallback (`parse_reflection`). The reflector is the policy itself
(`PolicyReflector`, as in the paper) or, for small models and tests,
`RuleReflector`, which takes the pivot and guidance from the env's verdicts.
The env is restored to its state before the pivot, the guidance is inserted
as a message there, and sampling continues. The training data are:

- the retry *with the guidance removed* (context distillation): the original
  context up to the pivot, then the retried suffix, loss only on the turns
  from the pivot on ("pivotal credit");
- the original failed trajectory, likewise masked before the pivot;
- optionally the reflection itself, rewarded 1 when the retry improved on the
  original, else 0 (its own group).

**Credit rule** (learner step 5, `amplify_positive`): successful samples'
advantage is set to 1, other non-negative advantages are multiplied by α
(3 in the paper's code, `OPMDReweightAdvGroupAdvantage`), negatives are left
unchanged. This rule is taken from that code, not the paper's text; argym applies
it to whatever estimator the preset uses (the paper: A = r − mean, no std).

**Off-policy handling.** The retried suffix was sampled with the guidance in
the context, but is trained on the context without it. The learner recomputes
π_old on the training context, so the PPO ratio is honest; the sampling
distribution μ (with guidance) still differs from π_old. Two answers, both
selectable: the paper's ratio-free OPMD loss (``policy_loss: opmd``,
L = −A·log π / (1 + τ), τ = 1), or a truncated importance weight
``min(π_old / μ, C)`` on each token's advantage (``tis_cap: C``; truncated IS
as in Espeholt et al. 2018's V-trace ρ̄ and verl's TIS), computed from the
sampler's log-probs, which the rollout engine keeps.

Modules: `retry` (`R3LConfig`, `R3LRollout`, pivotal credit: `mask_before`,
`retry_start`, `distill`), `reflection` (prompt, parse, reflectors), `credit` (the OPMD loss).
The credit rule is the learner's step 5 (`argym.algorithms.credit`) and the truncated importance
weight its general off-policy correction (`argym.algorithms.off_policy`), both named here too as
R³L's knobs. Those need torch and load on first use of one of their names here,
so the config (`R3LConfig`) reads without torch.
"""

import importlib
from typing import Any

from argym.algorithms.r3l.reflection import (
    PolicyReflector,
    Reflection,
    RuleReflector,
    parse_reflection,
    reflection_prompt,
)

__all__ = [
    "PolicyReflector",
    "Reflection",
    "RuleReflector",
    "amplify_positive",
    "credit_step",
    "importance_weighted",
    "opmd_loss",
    "parse_reflection",
    "reflection_prompt",
    "truncated_is_weight",
]

_LAZY = {
    "amplify_positive": "argym.algorithms.credit",
    "credit_step": "argym.algorithms.credit",
    "opmd_loss": "argym.algorithms.r3l.credit",
    "importance_weighted": "argym.algorithms.off_policy",
    "truncated_is_weight": "argym.algorithms.off_policy",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
