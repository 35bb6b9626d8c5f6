"""Streaming episodes one by one: a fast episode is not held back by a slow one, and an episode in flight when
the weights change goes on with the new weights, its earlier tokens keeping their version (partial rollouts)."""

from __future__ import annotations

import threading

import gymnasium as gym
import numpy as np
import pytest

from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.rollout import RolloutEngine
from argym.agents.scheduler import StreamingScheduler, VersionedGenerator
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.algorithms.r3l import Reflection
from argym.algorithms.r3l.retry import retry_start
from argym.envs import ListSource, Reply, TextEnv
from argym.types import Task

PACED_ID = "argym-test/Paced-v0"


class Gate:
    """Shared by one test's envs: slow episodes' env steps wait on `release`, which the env sets once
    `fast_needed` fast episodes have finished (`hold`: a callable every slow first step blocks on instead)."""

    def __init__(self, fast_needed: int = 0, hold=None):
        self.fast_needed, self.fast_done, self.hold = fast_needed, 0, hold
        self.release = threading.Event()
        self.lock = threading.Lock()


class PacedEnv(TextEnv):
    """Three turns, never solved; an episode whose task id starts with "slow" waits on its gate at each step."""

    def __init__(self, gate: Gate, max_turns: int = 3, **kw):
        self.gate = gate
        super().__init__(max_turns=max_turns, **kw)

    def load_tasks(self, tasks):
        return ListSource(
            [
                Task(id=name, prompt=({"role": "user", "content": "Say zzz."},), answer="zzz", split="test")
                for name in ("slow0", "fast0", "slow1", "fast1")
            ]
        )

    def respond(self, action):
        last = self.turn == self.max_turns - 1
        if self.task.id.startswith("slow"):
            if self.gate.hold is not None:
                self.gate.hold(self.turn)
            else:
                self.gate.release.wait(timeout=20)
        elif last:
            with self.gate.lock:
                self.gate.fast_done += 1
                if self.gate.fast_done == self.gate.fast_needed:
                    self.gate.release.set()
        return Reply(messages=[{"role": "user", "content": "Again."}], reward_parts={"outcome": 0.0})


if PACED_ID not in gym.registry:
    gym.register(PACED_ID, entry_point=PacedEnv, order_enforce=False, disable_env_checker=True)

SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=6)


def _policy(seed: int = 0) -> HFPolicy:
    tok = build_tiny_tokenizer()
    small = TinyModelConfig(hidden_size=32, num_layers=1, intermediate_size=64, num_heads=2)
    return HFPolicy(build_tiny_model(tok, small, seed=seed), tok)


def test_fast_episodes_finish_before_slow_ones():
    """Slow episodes' env steps block until every fast episode has finished all three turns: only a scheduler
    that lets each episode go on by itself finishes the fast ones first (lockstep turns would wait 20 s per
    slow step and finish the slow episodes first)."""
    gate = Gate(fast_needed=2)
    engine = RolloutEngine(PACED_ID, {"gate": gate}, _policy(), SAMPLING, max_total_tokens=400)
    scheduler = StreamingScheduler(engine)
    try:
        tasks = engine.task_source.take("test", 4)  # slow0, fast0, slow1, fast1
        trajs = scheduler.run(tasks, group_size=1, seed=3)
    finally:
        scheduler.close()
        engine.close()
    fast = {i for i, t in enumerate(trajs) if t.task_id.startswith("fast")}
    assert sorted(fast) == [1, 3] and gate.release.is_set()
    assert set(scheduler.last_finish_order[:2]) == fast, scheduler.last_finish_order
    for t in trajs:  # the rollout engine's invariants hold: three turns, exact ids and masks, versions
        assert t.turns == 3 and t.truncated and [t.group for t in trajs] == [0, 1, 2, 3]
        assert len(t.token_ids) == len(t.loss_mask) == len(t.sampler_logprobs) == len(t.policy_versions)
        assert [v for v, m in zip(t.policy_versions, t.loss_mask) if not m] == [-1] * (
            len(t.loss_mask) - sum(t.loss_mask)
        )
        assert all(v == 0 for v, m in zip(t.policy_versions, t.loss_mask) if m)
        assert all(t.loss_mask[e] == 1 and t.loss_mask[e + 1 : e + 2] in ([0], []) for e in t.turn_ends)


def test_an_episode_in_flight_continues_with_new_weights(sampled_logprobs_reference):
    """Partial rollouts: the weights change while a slow episode's first env step runs; its first turn keeps
    version 0 and the old model's log-probs, its later turns are sampled by the new model at version 1."""
    old, new = _policy(seed=0), _policy(seed=1)
    generator = VersionedGenerator.copy_of(old)
    published = threading.Event()

    def hold(turn: int) -> None:
        if turn == 0 and not published.is_set():
            generator.publish(new.model, 1)  # between two generate calls: the lock makes sure
            published.set()

    gate = Gate(hold=hold)
    engine = RolloutEngine(PACED_ID, {"gate": gate}, generator, SAMPLING, max_total_tokens=400)
    scheduler = StreamingScheduler(engine)
    try:
        trajs = scheduler.run(engine.task_source.take("test", 1), group_size=1, seed=5)  # one slow episode
    finally:
        scheduler.close()
        engine.close()
    (t,) = trajs
    ends = [-1, *t.turn_ends]
    starts = [next(i for i in range(ends[k] + 1, len(t.loss_mask)) if t.loss_mask[i]) for k in range(3)]
    for k, (start, end) in enumerate(zip(starts, t.turn_ends)):
        turn = range(start, end + 1)
        assert {t.policy_versions[i] for i in turn} == {0 if k == 0 else 1}
        model = old.model if k == 0 else new.model
        ref, _ = sampled_logprobs_reference(
            model, t.token_ids[:start], t.token_ids[start : end + 1], 1.0, 1.0
        )
        assert [t.sampler_logprobs[i] for i in turn] == pytest.approx(ref.tolist(), abs=1e-4)


MATH = ("argym/Math-v0", {"tasks": "arithmetic(digits=2,ops=+,terms=2)", "max_attempts": 3})


def test_snapshots_and_a_resume_from_the_pivot_stream_as_on_the_engine():
    """R³L's two calls, streamed (its partial rollouts): `run(record_snapshots=True)` records the env's state
    before each turn, and `resume` continues from one in a pooled env: the context given kept (mask 0,
    version -1), the turns before the pivot carried over, the rest sampled at the generator's version, the env
    going on from the pivot to its last attempt."""
    generator = VersionedGenerator(_policy(), version=3)
    engine = RolloutEngine(*MATH, generator, SamplingParams(max_new_tokens=6))
    scheduler = StreamingScheduler(engine)
    try:
        rng = np.random.default_rng(0)
        tasks = [engine.task_source.sample(rng, "train") for _ in range(2)]
        trajs = scheduler.run(tasks, group_size=2, seed=1, record_snapshots=True)
        assert all(not t.success and t.turns == 3 and len(t.snapshots) == 3 for t in trajs)  # untrained
        k, t = 1, trajs[0]
        start, _ = retry_start(t, Reflection(k, "Add the tens first."), scheduler.renderer)
        (guided,) = scheduler.resume([start], seed=3)
    finally:
        scheduler.close()
        engine.close()
    n = len(start.ids)
    assert guided.token_ids[:n] == start.ids and not any(guided.loss_mask[:n])
    assert set(guided.policy_versions[:n]) == {-1}
    assert guided.turn_ends[:k] == t.turn_ends[:k] and guided.infos[:k] == t.infos[:k]
    assert (
        guided.turns == 3 and len(guided.turn_ends) == 3 and guided.terminated
    )  # attempts 2 and 3 from the pivot
    sampled = [v for v, m in zip(guided.policy_versions[n:], guided.loss_mask[n:]) if m]
    assert sampled and set(sampled) == {3}
