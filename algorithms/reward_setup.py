"""Wires a recipe's `reward:` section to the parts it needs: the PRM, the policy (SAR), the token limits.

`argym.rewards.compose.RewardComposer` is pure scoring; the components that
need more than a trajectory get their scorer here, where the trainer's policy
and config are known (docs/design.md: rewards never import learners).
"""

from __future__ import annotations

from typing import Any

from argym.algorithms.sampling import longest_turn, overlong_penalty
from argym.rewards.compose import RewardComposer
from argym.rewards.prm import load_prm
from argym.rewards.sar import sar_rewards

from argym.errors import ConfigError


def build_composer(cfg: Any, policy: Any) -> RewardComposer:
    """The composer for `cfg.reward` (a `TrainConfig`), scoring SAR with `policy`'s own log-probs."""
    rc, sc = cfg.reward, cfg.sampling
    if "overlong" in rc.weights and sc.overlong:
        raise ConfigError(
            "The overlong penalty is on twice: as reward.weights.overlong and as sampling.overlong "
            "(DAPO's). Keep one (set sampling.overlong=false or drop the reward component)."
        )
    sequence = {}
    if "overlong" in rc.weights:
        limits = sc.overlong_limits(cfg.rollout.max_new_tokens)
        sequence["overlong"] = lambda trajs: [overlong_penalty(longest_turn(t), *limits) for t in trajs]
    if "sar" in rc.weights:
        empty = policy.renderer.prompt_ids([{"role": "user", "content": ""}])  # "the answer alone"
        sequence["sar"] = lambda trajs: sar_rewards(policy.model, trajs, empty, policy.pad_id)
    prm = load_prm(rc.prm) if "process" in rc.weights else None
    return RewardComposer(rc, sequence=sequence, prm=prm, decode=policy.renderer.decode)
