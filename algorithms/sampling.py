"""DAPO's rollout-side parts: soft overlong punishment and dynamic sampling (arXiv 2503.14476).

Both run inside the trainer's "score → update" order (docs/design.md): the overlong
penalty is a reward component (step 1), dynamic sampling filters groups on the
*outcome* reward, before the penalty (step 3). Lengths count policy tokens, so
env replies never count against a response, and the penalty reads the longest
turn of an episode (`longest_turn`), since L_max caps each turn's generation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from argym.errors import ConfigError
from argym.rewards.overlong import longest_turn, overlong_penalty
from argym.types import Trajectory


@dataclass
class SamplingConfig:
    """DAPO's dynamic sampling and soft overlong punishment (both off by default)."""

    dynamic: bool = False
    """Drop groups whose outcome rewards are all equal and draw more until the batch is full (DAPO §3.2)."""
    max_draws: int = 10
    """Most rollout rounds per step before dynamic sampling gives up with an error (verl's max_num_gen_batches)."""
    overlong: bool = False
    """Add DAPO's soft overlong punishment R_len (arXiv 2503.14476 eq. 13) to the reward."""
    overlong_max_tokens: int | None = None
    """L_max in policy tokens; None: the rollout's `max_new_tokens`."""
    overlong_cache_tokens: int | None = None
    """L_cache, the soft band below L_max; None: 20% of L_max (DAPO: 4,096 of 20,480)."""
    overlong_factor: float = 1.0
    """Scale of the penalty (verl's `penalty_factor`, 1.0 in DAPO)."""

    def __post_init__(self) -> None:
        if self.max_draws < 1:
            raise ConfigError(
                f"sampling.max_draws must be >= 1, got {self.max_draws}; DAPO's verl recipe uses 10."
            )
        if self.overlong_max_tokens is not None and self.overlong_max_tokens < 1:
            raise ConfigError(
                f"sampling.overlong_max_tokens must be >= 1 or null, got {self.overlong_max_tokens}."
            )
        if self.overlong_cache_tokens is not None and self.overlong_cache_tokens < 1:
            raise ConfigError(
                f"sampling.overlong_cache_tokens must be >= 1 or null, got {self.overlong_cache_tokens}."
            )
        if self.overlong_factor < 0:
            raise ConfigError(f"sampling.overlong_factor must be >= 0, got {self.overlong_factor}.")

    def overlong_limits(self, max_new_tokens: int) -> tuple[int, int]:
        """(L_max, L_cache) resolved against the rollout's token budget."""
        l_max = self.overlong_max_tokens or max_new_tokens
        cache = self.overlong_cache_tokens or max(1, round(0.2 * l_max))
        if cache > l_max:
            raise ConfigError(f"sampling.overlong_cache_tokens ({cache}) must be <= L_max ({l_max}).")
        return l_max, cache


def apply_overlong(
    trajectories: Sequence[Trajectory], max_tokens: int, cache_tokens: int, factor: float = 1.0
) -> list[Trajectory]:
    """Copies of `trajectories` with R_len of their longest turn (`longest_turn`) added to `reward`.

    The penalty is also recorded as `reward_parts["overlong"]` in the last info.
    """
    out = []
    for t in trajectories:
        pen = overlong_penalty(longest_turn(t), max_tokens, cache_tokens, factor)
        infos = list(t.infos)
        if infos:
            last = dict(infos[-1])
            last["reward_parts"] = {**last.get("reward_parts", {}), "overlong": pen}
            infos[-1] = last
        out.append(dataclasses.replace(t, reward=t.reward + pen, infos=infos))
    return out


def informative_groups(trajectories: Sequence[Trajectory], outcome: Sequence[float]) -> list[int]:
    """Group ids whose outcome rewards are not all equal (DAPO eq. 11: 0 < |correct| < G).

    Equal is the learner's: not flat (`argym.algorithms.advantages.flat_groups`, so a one-ulp spread
    is equal). Infra failures are ignored when comparing rewards. A group needs two valid
    samples with different outcomes: a group of one (sampled alone, or left
    alone by infra failures) is dropped, unlike verl's DAPO recipe, which keeps
    groups of size 1. argym gives a lone sample advantage 0 (it has no baseline,
    `group_normalized`), so keeping it would spend a batch slot on a sample that
    carries no gradient. Ids are returned in first-seen order.
    """
    import torch  # here, so that reading a recipe (SamplingConfig) never imports torch

    from argym.algorithms.advantages import flat_groups

    seen = list(dict.fromkeys(t.group for t in trajectories))
    valid = [(t.group, float(r)) for t, r in zip(trajectories, outcome) if not t.infra_failure]
    if not valid:
        return []
    groups = [g for g, _ in valid]
    flat = flat_groups(torch.tensor([r for _, r in valid], dtype=torch.float64), torch.tensor(groups))
    varied = {g for g, f in zip(groups, flat.tolist()) if not f}  # a group of one is flat
    return [g for g in seen if g in varied]


def draw_informative(
    draw: Callable[[int], tuple[Sequence[Trajectory], Sequence[float]]], groups_needed: int, max_draws: int
) -> tuple[list[Trajectory], dict[str, float]]:
    """DAPO's dynamic sampling: call ``draw(k) -> (trajectories, outcome_rewards)`` until full.

    `draw(k)` rolls out round k's groups. Groups whose outcome rewards are all
    equal are dropped; kept groups accumulate until `groups_needed` are in, and
    the surplus of the last round is cut (verl-recipe `dapo_ray_trainer.py`).
    Metrics: rounds drawn and the fraction of groups seen that were informative.
    Group ids are renumbered so rounds never collide. After `max_draws` rounds
    without a full batch a `ConfigError` says what to change.
    """
    kept: list[Trajectory] = []
    n_groups = n_seen = n_informative = 0
    for k in range(max_draws):
        trajs, outcome = draw(k)
        keep = informative_groups(trajs, outcome)
        n_seen += len({t.group for t in trajs})
        n_informative += len(keep)
        for g in keep:
            if n_groups == groups_needed:
                break
            kept.extend(dataclasses.replace(t, group=n_groups) for t in trajs if t.group == g)
            n_groups += 1
        if n_groups == groups_needed:
            return kept, {
                "sampling/draws": float(k + 1),
                "sampling/informative_frac": n_informative / max(n_seen, 1),
            }
    raise ConfigError(
        f"Dynamic sampling found {n_groups} of {groups_needed} groups with unequal outcome rewards in "
        f"{max_draws} draws ({n_seen} groups seen): the tasks are too easy or too hard for the policy. "
        f"Raise sampling.max_draws, the group size (a group needs at least 2 valid samples), or change the task "
        f"difficulty; or set sampling.dynamic=false."
    )
