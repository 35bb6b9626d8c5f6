"""Bounded time: every `reset` and `step` returns within its bound; a hanging grader is reported.

Every call the checks make runs under a watchdog (`argym.check.base.bounded`)
and is timed. This check judges every call made so far, so it runs after the
others (run alone, it first plays a generic and an oracle episode): a step
that hung in any check, or took longer than ``step_timeout_s``
(``reset_timeout_s`` for a reset), fails it.
"""

from __future__ import annotations

from argym.check.base import FAIL, PASS, Outcome, Subject
from argym.check.episodes import generic_script, oracle_script, play

NAME = "timing"


def check(subject: Subject) -> Outcome:
    if not subject.timings.calls:  # run alone: no other check has timed a call yet
        env = subject.make()
        try:
            for script in (generic_script(env), oracle_script(env)):
                if script is not None:
                    trace = play(
                        subject, env, script, subject.config.seed, subject.config.max_steps, label="timing"
                    )
                    if trace.hang:
                        break
        finally:
            subject.close(env)
    bounds = {"reset": subject.config.reset_timeout_s, "step": subject.config.step_timeout_s}
    slow = [
        f"{label} took {s:.1f} s (bound {bounds[kind]:g} s)"
        for kind, s, label in subject.timings.calls
        if kind in bounds and s > bounds[kind]
    ]
    problems = list(dict.fromkeys(subject.timings.hangs + slow))
    if problems:
        return Outcome(NAME, FAIL, "; ".join(problems)[:2000])
    worst = {kind: max((s for k, s, _ in subject.timings.calls if k == kind), default=0.0) for kind in bounds}
    n = sum(1 for k, *_ in subject.timings.calls if k in bounds)
    return Outcome(
        NAME,
        PASS,
        f"{n} calls; slowest reset {worst['reset']:.2f} s (bound {bounds['reset']:g}), "
        f"slowest step {worst['step']:.2f} s (bound {bounds['step']:g})",
    )
