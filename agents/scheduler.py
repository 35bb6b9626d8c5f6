"""Asynchronous rollouts in one process: episodes streamed one by one, batches run ahead of the learner.

Three parts, each small (docs/async.md has the design):

- `VersionedGenerator`: the generating copy of the policy, its *version* (how many
  learner updates its weights hold) and the lock that keeps a weight load between
  two `generate` calls, never inside one. Every sampled token records the version.
- `StreamingScheduler`: episodes scheduled one by one, not in lockstep per turn. One
  generation thread batches whatever episodes are waiting for the policy *now*; each
  env step runs in a thread pool and sends its episode back to generation as soon as
  it returns, so a fast episode never waits for a slow one's env. An episode in
  flight when the weights change continues with the new ones, its earlier tokens
  keeping their version (partial rollouts: AReaL's interruptible generation,
  arXiv 2505.24298; APRIL, arXiv 2509.18521).
- `AheadOfLearner`: collects the batch of step j in its own thread once the
  generator holds version ≥ j − `max_staleness`, and hands batches to the learner in
  step order. The learner trains batch j at version j and publishes version j + 1
  after it, so every token trained at step j was sampled at a version in
  [j − max_staleness, j]: its lag is at most `max_staleness` (AReaL's staleness bound η).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from argym.agents.policy import Completion, SamplingParams
from argym.agents.rollout import RolloutEngine, _Episode, _last_assistant

from argym.errors import InfrastructureError
from argym.types import Task, Trajectory

log = logging.getLogger(__name__)


class VersionedGenerator:
    """A token policy whose weights are replaced only between `generate` calls, and which knows their version.

    `load(model)` copies a trained model's weights into `inner` (for a transformers
    policy `copy_weights`; for vLLM its `load_weights`). `publish` holds the same
    lock as `generate`, so one generate call sees one set of weights.
    """

    def __init__(self, inner: Any, load: Callable[[Any], Any], version: int = 0):
        self.inner = inner
        self.tokenizer = inner.tokenizer
        self.version = version
        self._load = load
        self._lock = threading.Lock()
        self._changed = threading.Condition()

    @classmethod
    def copy_of(cls, policy: Any, version: int = 0) -> VersionedGenerator:
        """A transformers policy's own copy to generate with, so the learner can update the original meanwhile."""
        from argym.agents.hf import HFPolicy

        inner = HFPolicy(
            copy.deepcopy(policy.model), policy.tokenizer, name=policy.name, compiled=policy.compiled
        )
        return cls(inner, lambda model: copy_weights(model, inner.model), version)

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

    def publish(self, model: Any, version: int) -> None:
        """Load `model`'s weights as `version` (between two generate calls) and wake whoever waits for it."""
        with self._lock:
            self._load(model)
            self.version = version
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, version: int, stop: threading.Event) -> bool:
        """Block until the weights are at least `version` (True) or `stop` is set (False)."""
        with self._changed:
            while self.version < version and not stop.is_set():
                self._changed.wait(timeout=0.1)
        return not stop.is_set()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No generation runs inside this block (e.g. while another policy samples from the global RNG)."""
        with self._lock:
            yield


@torch.no_grad()
def copy_weights(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Copy every parameter and buffer of `source` into the same-named one of `target`, in place."""
    src = dict(source.named_parameters()) | dict(source.named_buffers())
    for name, t in list(target.named_parameters()) + list(target.named_buffers()):
        if name not in src:
            raise ValueError(
                f"copy_weights: {name!r} is in the generator's model but not in the trained one."
            )
        t.copy_(src[name])


@dataclass(eq=False)  # identity: a run is a set member
class _Run:
    """One `StreamingScheduler.run` call: its episodes and who finished when."""

    episodes: list[_Episode]
    sampling: SamplingParams
    remaining: int
    index: dict[int, int] = field(default_factory=dict)  # id(episode) -> its place in `episodes`
    finish_order: list[int] = field(default_factory=list)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class StreamingScheduler:
    """Runs episodes of `engine`'s env one by one with `engine`'s agent (a token policy); thread-safe.

    Several `run` calls may be in flight at once (one per batch running ahead); one
    generation thread serves all of them, batching every episode that waits for the
    policy. Episodes keep the rollout engine's invariants (exact ids, masks, per-turn
    rewards, the token budget) and record each sampled token's policy version.
    `last_finish_order` is the episode indices of the latest finished run in the order
    they finished. Env instances are pooled and reused.
    """

    def __init__(self, engine: RolloutEngine, seed: int = 0):
        if engine.renderer is None:
            raise ValueError("StreamingScheduler drives token policies; got an agent that acts on messages.")
        self.engine = engine
        self.renderer = engine.renderer
        self._seed = seed
        self._calls = 0
        self._free_envs: list[Any] = []
        self._all_envs: list[Any] = []
        self._queue: deque[tuple[_Run, _Episode, Any]] = deque()  # (run, episode, what came back)
        self._wake = threading.Condition()
        self._closed = False
        self._runs: set[_Run] = set()
        self._thread: threading.Thread | None = None
        self.last_finish_order: list[int] = []

    # ----------------------------------------------------------------------- public

    def run(
        self, tasks: list[Task], group_size: int = 1, seed: int = 0, sampling: SamplingParams | None = None
    ) -> list[Trajectory]:
        """Roll out `group_size` episodes per task; ordered by task, then sample, as `RolloutEngine.run`."""
        self._start()
        episodes = [
            _Episode(env=None, task=task, group=t, obs=[])
            for t, task in enumerate(tasks)
            for _ in range(group_size)
        ]
        run = _Run(episodes, sampling or self.engine.sampling, remaining=len(episodes))
        run.index = {id(ep): i for i, ep in enumerate(episodes)}
        if not episodes:
            return []
        with self._wake:
            if self._closed:
                raise RuntimeError("StreamingScheduler.run after close().")
            self._runs.add(run)
        for i, ep in enumerate(episodes):
            self.engine._threads.submit(self._reset, run, ep, seed + i)
        run.done.wait()
        with self._wake:
            self._runs.discard(run)
        if run.error is not None:
            raise run.error
        self.last_finish_order = run.finish_order
        return [ep.trajectory() for ep in episodes]

    def close(self) -> None:
        """Stop generating; runs still in flight raise in their callers."""
        with self._wake:
            self._closed = True
            runs = list(self._runs)
            self._wake.notify_all()
        for run in runs:
            self._fail(run, RuntimeError("the rollout scheduler was closed while this batch was in flight"))
        if self._thread is not None:
            self._thread.join(timeout=60)
        for env in self._all_envs:
            env.close()
        self._all_envs.clear()
        self._free_envs.clear()

    # ----------------------------------------------------------------------- env side (pool threads)

    def _acquire(self) -> Any:
        with self._wake:
            if self._free_envs:
                return self._free_envs.pop()
        env = self.engine.new_env()
        with self._wake:
            self._all_envs.append(env)
        return env

    def _reset(self, run: _Run, ep: _Episode, seed: int) -> None:
        try:
            ep.env = self._acquire()
            try:
                ep.obs, _ = ep.env.reset(seed=seed, options={"task": ep.task})
            except InfrastructureError as e:
                ep.fail("reset", e)
            self._back(run, ep, None)
        except BaseException as e:  # handed to the caller of run()
            self._fail(run, e)

    def _step(self, run: _Run, ep: _Episode, action: str, turn_ended: bool) -> None:
        try:
            obs, reward, terminated, truncated, info = ep.env.step(action)
            ep.record(reward, terminated, truncated, info, obs)
            self._back(run, ep, turn_ended)
        except BaseException as e:  # handed to the caller of run()
            self._fail(run, e)

    def _back(self, run: _Run, ep: _Episode, what: Any) -> None:
        with self._wake:
            self._queue.append((run, ep, what))
            self._wake.notify_all()

    def _fail(self, run: _Run, error: BaseException) -> None:
        if run.error is None:
            run.error = error
        run.done.set()

    def _finish(self, run: _Run, ep: _Episode) -> None:
        if ep.env is not None:
            with self._wake:
                self._free_envs.append(ep.env)
        run.finish_order.append(run.index[id(ep)])
        run.remaining -= 1
        if run.remaining == 0:
            run.done.set()

    # ----------------------------------------------------------------------- generation thread

    def _start(self) -> None:
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="argym-generate", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                arrived = list(self._queue)
                self._queue.clear()
            live = [(run, ep) for run, ep, what in arrived if self._wants_turn(run, ep, what)]
            if live:
                try:
                    self._generate(live)
                except BaseException as e:  # every run waiting on this batch learns of it
                    for run, _ in live:
                        self._fail(run, e)

    def _wants_turn(self, run: _Run, ep: _Episode, what: Any) -> bool:
        """Append what the env said (or the prompt, for a new episode); False when the episode ended here."""
        if run.error is not None:
            return False
        if not ep.ids:  # just reset: the prompt, unless it is too long already
            if ep.infra_error:
                self._finish(run, ep)
                return False
            ep.extend(self.renderer.prompt_ids(ep.obs, tools=ep.task.tools), policy=False)
            if len(ep.ids) >= self.engine.max_total_tokens:
                ep.truncated, ep.finish_reason = True, "prompt_too_long"
                self._finish(run, ep)
                return False
            return True
        if ep.done:
            self._finish(run, ep)
            return False
        more = self.renderer.continuation_ids(
            ep.obs[_last_assistant(ep.obs) + 1 :], tools=ep.task.tools, turn_ended=bool(what)
        )
        if len(ep.ids) + len(more) >= self.engine.max_total_tokens:
            ep.truncated, ep.finish_reason = True, "token_budget"
            self._finish(run, ep)
            return False
        ep.extend(more, policy=False)
        return True

    def _generate(self, live: list[tuple[_Run, _Episode]]) -> None:
        """One generate call for every episode waiting now (each run's own sampling settings), then their env steps."""
        by_sampling: dict[SamplingParams, list[tuple[_Run, _Episode]]] = {}
        for run, ep in live:
            by_sampling.setdefault(run.sampling, []).append((run, ep))
        for sampling, group in by_sampling.items():
            budget = max(self.engine.max_total_tokens - len(ep.ids) for _, ep in group)
            params = replace(sampling, max_new_tokens=min(sampling.max_new_tokens, budget))
            self._calls += 1
            completions, version = self.engine.generate(
                [ep.ids for _, ep in group], params, seed=self._seed * 1000 + self._calls
            )
            for (run, ep), c in zip(group, completions):
                room = self.engine.max_total_tokens - len(ep.ids)
                if len(c.token_ids) > room:  # this episode's own budget is smaller than the batch's
                    c.token_ids, c.logprobs, c.finish_reason = c.token_ids[:room], c.logprobs[:room], "length"
                    c.text = self.renderer.decode(c.token_ids)
                ep.extend(c.token_ids, policy=True, logprobs=c.logprobs, version=version)
                ep.turn_ends.append(len(ep.ids) - 1)
                ep.finish_reason = c.finish_reason
                self.engine._threads.submit(self._step, run, ep, c.text, c.finish_reason == "stop")


class AheadOfLearner:
    """Collects the batch of step j (`collect(j)`) in its own thread once `generator` holds version ≥
    j − `max_staleness`; `take(j)` hands it over. Steps `first` ≤ j < `last` are collected.

    With `partial=False` the lag is fixed instead of bounded: batches are collected one at a time, in
    step order, and `settle(v)` (called before the generator takes version v) waits until every batch
    sampled at an older version is collected. So the batch of step j is sampled whole at version
    max(first, j − max_staleness) and nothing depends on thread timing: the run reproduces exactly.
    It is the "one step off-policy" pipeline at staleness 1 (the learner trains step j while the
    generator samples step j + 1), without partial rollouts.
    """

    def __init__(
        self,
        collect: Callable[[int], Any],
        generator: VersionedGenerator,
        max_staleness: int,
        first: int,
        last: int,
        partial: bool = True,
    ):
        self.collect = collect
        self.generator = generator
        self.max_staleness = max_staleness
        self.first = first
        self.last = last
        self.partial = partial
        self._stop = threading.Event()
        self._futures: dict[int, Future[Any]] = {}
        self._admitted = threading.Condition()
        workers = max_staleness + 1 if partial else 1  # one worker runs the batches in the order admitted
        self._workers = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="argym-batch")
        self._thread = threading.Thread(target=self._admit, args=(first,), name="argym-ahead", daemon=True)
        self._thread.start()

    def _admit(self, step: int) -> None:
        while step < self.last and self.generator.wait_for(step - self.max_staleness, self._stop):
            with self._admitted:
                self._futures[step] = self._workers.submit(self.collect, step)
                self._admitted.notify_all()
            step += 1

    def _future(self, step: int) -> Future[Any]:
        with self._admitted:
            while step not in self._futures:
                self._admitted.wait()
            return self._futures[step]

    def settle(self, version: int) -> None:
        """`partial=False`: return once every batch sampled at a version below `version` is collected
        (the batches of steps ≤ version − 1 + max_staleness); at once with partial rollouts."""
        last = min(version - 1 + self.max_staleness, self.last - 1)
        if self.partial or version <= self.first or last < self.first:
            return
        wait([self._future(last)])  # one worker, in step order: the earlier batches are done too

    def take(self, step: int) -> Any:
        """Step `step`'s batch, once collected (re-raises what its collection raised)."""
        future = self._future(step)
        with self._admitted:
            del self._futures[step]
        return future.result()

    def close(self) -> None:
        """Stop admitting batches and wait for those in flight (their results are dropped)."""
        self._stop.set()
        self._thread.join(timeout=60)
        self._workers.shutdown(wait=True, cancel_futures=True)


def version_lag(trajectories: list[Trajectory], version: int, bound: int) -> dict[str, float]:
    """Mean and max lag (learner version − the version that sampled it) over the trained policy tokens.

    Tokens of unknown version (-1, or a trajectory that records none) are left out. Raises if a
    token lags more than `bound` (max_staleness): the scheduler's guarantee, checked.
    """
    lags = [
        version - v
        for t in trajectories
        if not t.infra_failure and len(t.policy_versions) == len(t.loss_mask)
        for v, m in zip(t.policy_versions, t.loss_mask)
        if m and v >= 0
    ]
    if not lags:
        return {}
    if max(lags) > bound or min(lags) < 0:
        raise RuntimeError(
            f"trained tokens lag the learner (version {version}) by {min(lags)}..{max(lags)} versions; "
            f"rollout.max_staleness allows 0..{bound}. This is a bug in the rollout scheduler."
        )
    return {"train/version_lag_mean": sum(lags) / len(lags), "train/version_lag_max": float(max(lags))}
