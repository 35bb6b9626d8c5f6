"""Isolation: nothing of one episode is visible in the next (files, state, tool results).

One instance plays an episode that leaves marks (seed + 1: another task, the
family's `MARKS` write files and store values), then an episode on seed; a
fresh instance plays only the episode on seed. Both must see the same
observations, rewards and `info`: any difference is something episode 1 left.
"""

from __future__ import annotations

from argym.check.base import FAIL, PASS, Outcome, Subject
from argym.check.episodes import first_difference, generic_script, play

NAME = "isolation"


def check(subject: Subject) -> Outcome:
    seed, steps = subject.config.seed, subject.config.max_steps
    used = subject.make()
    fresh = subject.make()
    try:
        first = play(subject, used, generic_script(used), seed + 1, steps, label="isolation episode 1")
        second = play(subject, used, generic_script(used), seed, steps, label="isolation episode 2")
        alone = play(subject, fresh, generic_script(fresh), seed, steps, label="isolation fresh")
    finally:
        subject.close(used)
        subject.close(fresh)
    for t in (first, second, alone):
        if t.hang:
            return Outcome(NAME, FAIL, t.hang)
    if second.records() != alone.records():
        return Outcome(NAME, FAIL, "an episode after another differs from the same episode on a fresh instance: "
                                   + first_difference(second.records(), alone.records()))
    return Outcome(NAME, PASS, f"episode 2 ({len(second.steps)} steps, after {len(first.steps)} marking steps) "
                               f"equals the same episode on a fresh instance")
