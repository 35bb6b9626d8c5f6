"""Wires a recipe's `reward:` section to the parts it needs: the PRM, the policy (SAR), the token limits.

`argym.rewards.compose.RewardComposer` is pure scoring; the components that
need more than a trajectory get their scorer here, where the trainer's policy
and config are known (docs/design.md: rewards never import learners).
"""

from __future__ import annotations

from typing import Any

from argym.rewards.compose import REWARD_COMPONENTS, RewardComposer, RewardContext
from argym.rewards.custom import env_tasks, is_callable_spec
from argym.rewards.prm import load_prm


def build_composer(cfg: Any, policy: Any) -> RewardComposer:
    """The composer for `cfg.reward` (a `TrainConfig`): each weighted component's scorer built by its
    registered builder (`REWARD_COMPONENTS`) from the run's config and `policy` (SAR's log-probs)."""
    rc, context = cfg.reward, RewardContext(cfg, policy)
    sequence = {}
    for name in rc.weights:
        if is_callable_spec(name):  # a user's module:function: the composer loads it (rewards/custom.py)
            continue
        scorer = REWARD_COMPONENTS.get(name)(context)
        if scorer is not None:  # None: outcome and process, the composer's own
            sequence[name] = scorer
    prm = load_prm(rc.prm) if "process" in rc.weights else None
    tasks = env_tasks(cfg.env.id, cfg.env.kwargs)  # a module:function reward may take the task
    return RewardComposer(rc, sequence=sequence, prm=prm, decode=policy.renderer.decode, tasks=tasks)
