"""Snapshot/restore: a snapshot taken mid-episode, pickled and restored into a fresh instance, replays to
the same future.

Applies to envs with ``snapshot()`` and ``restore(state)`` (argym's `TextEnv`
has both). The snapshot is taken after the first step (after reset if that
step ended the episode); the rest of the episode's actions are then sent to
the original and to the restored instance, which must answer alike.
"""

from __future__ import annotations

import pickle

from argym.check.base import FAIL, NOT_APPLICABLE, PASS, Hang, Outcome, Subject, owner, short
from argym.check.episodes import first_difference, generic_script, play

NAME = "snapshot"


def check(subject: Subject) -> Outcome:
    env = subject.make()
    taker = owner(env, "snapshot")
    if taker is None or owner(env, "restore") is None:
        subject.close(env)
        return Outcome(NAME, NOT_APPLICABLE, "the env has no snapshot()/restore()")
    fresh = None
    try:
        script = generic_script(env)  # wrong answers keep a multi-turn episode going past the snapshot
        head = play(subject, env, script, subject.config.seed, 1, label="snapshot head")
        if head.hang:
            return Outcome(NAME, FAIL, head.hang)
        if head.done:  # the first step ended it: snapshot right after reset instead
            subject.reset(env, seed=subject.config.seed, label="snapshot head")
        blob = subject.call(env, "snapshot", lambda: pickle.dumps(taker.snapshot()), "snapshot")
        rest = play(
            subject,
            env,
            script,
            None,
            subject.config.max_steps,
            label="snapshot original",
            start=0 if head.done else 1,
            reset=False,
        )
        fresh = subject.make()
        restorer = owner(fresh, "restore")
        assert restorer is not None, "a fresh instance of the env has restore() as the first one did"
        subject.call(fresh, "restore", lambda: restorer.restore(pickle.loads(blob)), "restore")
        replay = play(
            subject,
            restorer,
            lambda _e, i: rest.actions[i],
            None,
            len(rest.actions),
            label="snapshot restored",
            reset=False,
        )
    except Hang as e:
        return Outcome(NAME, FAIL, str(e))
    except Exception as e:
        return Outcome(
            NAME, FAIL, f"snapshot, pickling or restore raised {type(e).__name__}: {short(str(e), 400)}"
        )
    finally:
        subject.close(env)
        if fresh is not None:
            subject.close(fresh)
    for t in (rest, replay):
        if t.hang:
            return Outcome(NAME, FAIL, t.hang)
    if rest.steps != replay.steps:
        return Outcome(
            NAME,
            FAIL,
            "the restored instance answered differently: "
            + first_difference(["", *rest.steps], ["", *replay.steps]),
        )
    return Outcome(
        NAME,
        PASS,
        f"pickled snapshot ({len(blob)} bytes) restored into a fresh instance replays "
        f"{len(rest.steps)} steps identically",
    )
