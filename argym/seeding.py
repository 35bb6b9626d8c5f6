"""One seed per random draw of a run: `seed_for(seed, step, draw, purpose)`.

A run has one seed; every sampling call derives its own from it, the training
step (or call count), the draw within that step (dynamic sampling draws again)
and what the draw is for. Writing that arithmetic once keeps two uses from
sharing a stream by accident, and keeps the numbers the same in every process
(plain integer arithmetic: no `hash()` of a string, which Python salts per process).
"""

from __future__ import annotations

from argym.errors import ConfigError

PURPOSES = ("rollout", "value_pretrain", "best_of_n", "branch")
"""What a draw is for: RL-step rollouts, VAPO's value-pretraining rollouts, PRM best-of-N candidates,
agent-PRM branch play-outs. Each owns a disjoint block of seeds."""

_RUN = 1_000_003  # stride of the run's seed (a prime)
_DRAW = 7_919  # stride of the draw within a step (a prime): distinct while step < 7_919
_PURPOSE = 1 << 40  # stride of the purpose: above every run seed × _RUN for seeds < 1_099_000


def seed_for(seed: int, step: int, draw: int = 0, purpose: str = "rollout") -> int:
    """The seed of draw `draw` at step `step` for `purpose`, in a run seeded with `seed`.

    Distinct (step, draw, purpose) give distinct seeds while 0 ≤ step < 7 919 and
    0 ≤ draw < 126 (or draw is always 0), for run seeds 0 ≤ seed < 1 099 000.
    The rollout seeds are those argym always used (seed · 1 000 003 + step + 7 919 · draw),
    so recorded runs replay unchanged.
    """
    if purpose not in PURPOSES:
        raise ConfigError(f"Unknown seed purpose {purpose!r}; expected one of {', '.join(PURPOSES)}.")
    return PURPOSES.index(purpose) * _PURPOSE + seed * _RUN + step + draw * _DRAW
