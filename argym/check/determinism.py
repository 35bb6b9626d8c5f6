"""Determinism: the same seed and actions give the same observations, rewards and `info`.

Compared across two fresh instances in this process and, unless ``--quick``,
the generic episode against a fresh interpreter (`argym.check.child`), which catches what one
process hides: hash randomisation of ``set`` order, ids and addresses in the
output, module-level state.
"""

from __future__ import annotations

from argym.check.base import FAIL, PASS, Outcome, Subject
from argym.check.child import run_child
from argym.check.episodes import episode, first_difference, scripts_of

NAME = "determinism"


def check(subject: Subject) -> Outcome:
    env = subject.make()
    names = list(scripts_of(env))
    subject.close(env)
    compared = []
    for name in names:
        a, b = episode(subject, name), episode(subject, name)
        for t in (a, b):
            if t.hang:
                return Outcome(NAME, FAIL, t.hang)
        if a.records() != b.records():
            return Outcome(
                NAME,
                FAIL,
                f"two fresh instances, seed {subject.config.seed}, {name} actions: "
                + first_difference(a.records(), b.records()),
            )
        compared.append(f"{name} ({len(a.steps)} steps)")
        if not subject.config.quick and name == names[0]:  # one script crosses processes: each costs a start
            other = run_child(subject.config, "trace", script=name)
            if other.get("error"):
                return Outcome(NAME, FAIL, f"the episode in a child process failed: {other['error']}")
            if other["records"] != a.records():
                return Outcome(
                    NAME,
                    FAIL,
                    f"this process vs a fresh process, {name} actions: "
                    + first_difference(a.records(), other["records"]),
                )
    where = "two instances" + ("" if subject.config.quick else " and a child process")
    return Outcome(NAME, PASS, f"identical across {where}: {', '.join(compared)}")
