"""DAPO's soft overlong punishment (arXiv 2503.14476 eq. 13), in policy tokens: the ``overlong`` reward.

Pure scoring, used by the ``overlong`` reward component and by DAPO's
``sampling.overlong`` (argym.algorithms.sampling.apply_overlong).
"""

from __future__ import annotations

from argym.types import Trajectory


def overlong_penalty(length: int, max_tokens: int, cache_tokens: int, factor: float = 1.0) -> float:
    """DAPO's soft overlong punishment R_len(y) (arXiv 2503.14476 eq. 13), times `factor`.

    0 if |y| ≤ L_max − L_cache; ((L_max − L_cache) − |y|) / L_cache inside the band; −1 beyond L_max.

    >>> overlong_penalty(90, 100, 20), overlong_penalty(100, 100, 20), overlong_penalty(101, 100, 20)
    (-0.5, -1.0, -1.0)
    """
    free = max_tokens - cache_tokens
    if length <= free:
        return 0.0
    if length <= max_tokens:
        return factor * (free - length) / cache_tokens
    return -factor


def longest_turn(traj: Trajectory) -> int:
    """Policy tokens of the trajectory's longest turn: the |y| the overlong penalty reads.

    L_max is a per-turn budget (the rollout's `max_new_tokens` caps each generation),
    so a multi-turn episode is judged by its longest turn, not by the sum of its
    turns: three turns of 10 tokens under a 16-token cap are not overlong. One
    penalty in [−1, 0] per episode, as DAPO's eq. 13 gives one per response,
    whatever the number of turns (a sum over turns would grow with it). Turn k
    holds the policy tokens up to `turn_ends[k]`; without turn ends the whole
    trajectory is one turn. For one turn this is eq. 13 exactly.
    """
    longest = count = 0
    ends = set(traj.turn_ends)
    for p, m in enumerate(traj.loss_mask):
        count += bool(m)
        if p in ends:
            longest, count = max(longest, count), 0
    return max(longest, count)
