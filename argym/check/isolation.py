"""Isolation: nothing of one episode is visible in the next (files, state, tool results).

A fresh instance plays an episode on seed, before anything has left a mark;
then another instance plays an episode that leaves marks (seed + 1: another
task; the family's `MARKS` write files and store values) and the episode on
seed. Both episodes on seed must see the same observations, rewards and
`info`: any difference is something that was left behind, in the instance or
in what instances share (a process-wide sandbox, a cache).
"""

from __future__ import annotations

from argym.check.base import FAIL, PASS, Outcome, Subject
from argym.check.episodes import first_difference, generic_script, play

NAME = "isolation"


def check(subject: Subject) -> Outcome:
    seed, steps = subject.config.seed, subject.config.max_steps
    fresh = subject.make()
    try:  # first, before any mark exists: a sandbox shared by the process must not carry one across either
        alone = play(subject, fresh, generic_script(fresh), seed, steps, label="isolation fresh")
    finally:
        subject.close(fresh)
    used = subject.make()
    try:
        first = play(subject, used, generic_script(used), seed + 1, steps, label="isolation episode 1")
        second = play(subject, used, generic_script(used), seed, steps, label="isolation episode 2")
    finally:
        subject.close(used)
    for t in (first, second, alone):
        if t.hang:
            return Outcome(NAME, FAIL, t.hang)
    if second.records() != alone.records():
        return Outcome(
            NAME,
            FAIL,
            "an episode after another differs from the same episode on a fresh instance: "
            + first_difference(second.records(), alone.records()),
        )
    return Outcome(
        NAME,
        PASS,
        f"episode 2 ({len(second.steps)} steps, after {len(first.steps)} marking steps) "
        f"equals the same episode on a fresh instance",
    )
