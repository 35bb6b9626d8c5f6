"""Rollouts that keep time with the learner's weights: the versioned generator, and episodes streamed one by one.

- `VersionedGenerator`: a run's `Generator` (agents/policy.py) with the *version* of the weights it
  holds (how many learner updates they contain) and the lock that keeps a weight load between two
  `generate` calls, never inside one. Every token it samples records the version. A training run
  samples every rollout through one; the learner publishes each version to it (after every update in
  sync mode, before each batch is taken in async mode: algorithms/off_policy.py, which also bounds how
  far a batch may run ahead of the learner).
- `StreamingScheduler`: episodes scheduled one by one, not in lockstep per turn. Each env step (and
  reset) runs in a thread pool and asks for its episode's next turn as soon as it returns; a
  `RequestBatcher` (agents/batching.py) generates, in one call, every turn asked for by then. A fast
  episode never waits for a slow one's env. An episode in flight when the weights change continues
  with the new ones, its earlier tokens keeping their version (partial rollouts: AReaL's
  interruptible generation, arXiv 2505.24298; APRIL, arXiv 2509.18521). It offers the engine's `run` (with
  env snapshots before each turn) and `resume` (from a snapshot), so a strategy registered with
  `streams=True` (algorithms/strategies.py) streams its episodes here: R³L's retries, the Decomposer's
  hinted sub-episodes. docs/async.md has the design.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from argym.agents.batching import RequestBatcher
from argym.agents.policy import Completion, Generator, SamplingParams
from argym.agents.rollout import Episode, Resume, RolloutEngine
from argym.types import Task, Trajectory


class VersionedGenerator:
    """A `Generator` whose weights are replaced only between `generate` calls, and which knows their version.

    `publish(model, version)` loads a trained model's weights into `inner` (`Generator.load_weights`)
    under the same lock as `generate`, so one generate call sees one set of weights.
    """

    def __init__(self, inner: Generator, version: int = 0):
        self.inner = inner
        self.tokenizer = inner.tokenizer
        self.version = version
        self.load_s: float | None = None
        """The seconds the latest `publish` took to load the weights (waiting for a generate call included);
        None: there was nothing to load (the trained policy generating itself)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition()

    @classmethod
    def copy_of(cls, policy: Any, version: int = 0) -> VersionedGenerator:
        """A transformers policy's own copy to generate with, so the learner can update the original meanwhile."""
        return cls(policy.copy(), version)

    def generate(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        return self.generate_versioned(prompts, sampling, seed)[0]

    def generate_versioned(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int | None = None
    ) -> tuple[list[Completion], int]:
        """Completions for `prompts` and the version of the weights that sampled all of them."""
        with self._lock:
            return self.inner.generate(prompts, sampling, seed=seed), self.version

    def publish(self, model: Any, version: int) -> float | None:
        """Load `model`'s weights as `version` (between two generate calls) and wake whoever waits for it;
        returns `load_s`."""
        t0 = time.perf_counter()
        with self._lock:
            loaded = self.inner.load_weights(model)
            self.version = version
        self.load_s = None if loaded is None else time.perf_counter() - t0
        with self._changed:
            self._changed.notify_all()
        return self.load_s

    def wait_for(self, version: int, stop: threading.Event) -> bool:
        """Block until the weights are at least `version` (True) or `stop` is set (False)."""
        with self._changed:
            while self.version < version and not stop.is_set():
                self._changed.wait(timeout=0.1)
        return not stop.is_set()

    def close(self) -> None:
        """Close the generator inside."""
        self.inner.close()


@dataclass(eq=False)  # identity: a run is a set member
class _Run:
    """One `StreamingScheduler.run` call: its episodes and who finished when."""

    episodes: list[Episode]
    sampling: SamplingParams
    remaining: int
    index: dict[int, int] = field(default_factory=dict)  # id(episode) -> its place in `episodes`
    finish_order: list[int] = field(default_factory=list)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class StreamingScheduler:
    """Runs episodes of `engine`'s env one by one with `engine`'s agent (a token policy); thread-safe.

    Several `run` calls may be in flight at once (one per batch running ahead); one request
    batcher serves all of them, batching every episode that waits for the policy. Episodes keep
    the rollout engine's invariants (exact ids, masks, per-turn rewards, the token budget: the
    same `Episode` steps) and record each sampled token's policy version. `last_finish_order` is
    the episode indices of the latest finished run in the order they finished. Env instances are
    pooled and reused.
    """

    def __init__(self, engine: RolloutEngine, seed: int = 0, step_threads: int = 16):
        if engine.renderer is None:
            raise ValueError("StreamingScheduler drives token policies; got an agent that acts on messages.")
        self.engine = engine
        self.renderer = engine.renderer
        self._batcher = RequestBatcher(engine.generate, self.renderer.decode, first_seed=seed * 1000)
        self._steps = ThreadPoolExecutor(max_workers=step_threads, thread_name_prefix="argym-stream")
        self._lock = threading.Lock()
        self._free_envs: list[Any] = []
        self._all_envs: list[Any] = []
        self._closed = False
        self._runs: set[_Run] = set()
        self.last_finish_order: list[int] = []

    @property
    def agent(self) -> Any:
        """The engine's agent: the run's `VersionedGenerator`, which a strategy samples its own text with (R³L's
        reflections, the Decomposer's hints) between the episodes it streams here."""
        return self.engine.agent

    @property
    def sampling(self) -> SamplingParams:
        return self.engine.sampling

    @property
    def max_total_tokens(self) -> int:
        return self.engine.max_total_tokens

    def run(
        self,
        tasks: list[Task],
        group_size: int = 1,
        seed: int = 0,
        sampling: SamplingParams | None = None,
        record_snapshots: bool = False,
    ) -> list[Trajectory]:
        """Roll out `group_size` episodes per task; ordered by task, then sample, as `RolloutEngine.run` (with
        `record_snapshots`, the env's state before each turn too, for R³L's retries)."""
        episodes = [
            Episode(env=None, task=task, group=t, obs=[], snapshots=[] if record_snapshots else None)
            for t, task in enumerate(tasks)
            for _ in range(group_size)
        ]
        return self._stream(
            episodes, sampling, [partial(Episode.reset, seed=seed + i) for i in range(len(episodes))]
        )

    def resume(
        self, starts: list[Resume], seed: int = 0, sampling: SamplingParams | None = None
    ) -> list[Trajectory]:
        """Continue each `Resume` in a pooled env restored to its state (R³L's retry from its pivot), streamed as
        `run`'s episodes are; ordered as `starts` (`RolloutEngine.resume`; `seed` is the engine's signature:
        the request batcher seeds each generate call)."""
        episodes = [Episode.resuming(st) for st in starts]
        return self._stream(episodes, sampling, [partial(Episode.restore, state=st.state) for st in starts])

    def _stream(
        self, episodes: list[Episode], sampling: SamplingParams | None, begin: list[Callable[[Episode], None]]
    ) -> list[Trajectory]:
        """Run `episodes` one by one, each started by its `begin` (a reset, or a restore) in a pooled env."""
        if not episodes:
            return []
        run = _Run(episodes, sampling or self.engine.sampling, remaining=len(episodes))
        run.index = {id(ep): i for i, ep in enumerate(episodes)}
        with self._lock:
            if self._closed:
                raise RuntimeError("StreamingScheduler.run after close().")
            self._runs.add(run)
            for ep, start in zip(episodes, begin):
                self._steps.submit(self._start, run, ep, start)
        run.done.wait()
        with self._lock:
            self._runs.discard(run)
        if run.error is not None:
            raise run.error
        self.last_finish_order = run.finish_order
        return [ep.trajectory() for ep in episodes]

    def close(self) -> None:
        """Stop generating; runs still in flight raise in their callers."""
        error = RuntimeError("the rollout scheduler was closed while this batch was in flight")
        with self._lock:
            self._closed = True
            runs = list(self._runs)
        for run in runs:
            self._fail(run, error)
        self._batcher.close(error)
        self._steps.shutdown(wait=False, cancel_futures=True)
        for env in self._all_envs:
            env.close()
        self._all_envs.clear()
        self._free_envs.clear()

    # ---- each episode's way: reset (or restore), then turns of generate and env step, in the step pool -

    def _start(self, run: _Run, ep: Episode, begin: Callable[[Episode], None]) -> None:
        try:
            ep.env = self._acquire()
            begin(ep)
            if ep.infra_error or not ep.open(self.renderer, self.engine.max_total_tokens):
                self._finish(run, ep)
            else:
                self._ask(run, ep)
        except BaseException as e:  # handed to the caller of run()
            self._fail(run, e)

    def _ask(self, run: _Run, ep: Episode) -> None:
        """Queue the episode's next turn; `_answered` takes it from there."""
        if run.error is not None:
            return
        limit = ep.limit(run.sampling, self.engine.max_total_tokens)
        future = self._batcher.submit(ep.ids, replace(run.sampling, max_new_tokens=limit))
        future.add_done_callback(lambda f: self._answered(run, ep, f))

    def _answered(self, run: _Run, ep: Episode, future: Future[tuple[list[Completion], int]]) -> None:
        """The turn came back (in the batcher's thread): record it and send it to the env."""
        try:
            (completion,), version = future.result()
            ep.take(completion, version)
            self._steps.submit(self._step, run, ep, completion)
        except BaseException as e:  # handed to the caller of run()
            self._fail(run, e)

    def _step(self, run: _Run, ep: Episode, completion: Completion) -> None:
        try:
            ep.snapshot()
            obs, reward, terminated, truncated, info = ep.env.step(completion.text)
            ep.record(reward, terminated, truncated, info, obs)
            turn_ended = completion.finish_reason == "stop"
            if ep.follow(self.renderer, self.engine.max_total_tokens, turn_ended):
                self._ask(run, ep)
            else:
                self._finish(run, ep)
        except BaseException as e:  # handed to the caller of run()
            self._fail(run, e)

    def _acquire(self) -> Any:
        with self._lock:
            if self._free_envs:
                return self._free_envs.pop()
        env = self.engine.new_env()
        with self._lock:
            self._all_envs.append(env)
        return env

    def _finish(self, run: _Run, ep: Episode) -> None:
        with self._lock:
            if ep.env is not None:
                self._free_envs.append(ep.env)
            run.finish_order.append(run.index[id(ep)])
            run.remaining -= 1
            if run.remaining == 0:
                run.done.set()

    def _fail(self, run: _Run, error: BaseException) -> None:
        if run.error is None:
            run.error = error
        run.done.set()
