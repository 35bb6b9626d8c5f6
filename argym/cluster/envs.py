"""Env instances hosted in Ray actors, driven by the rollout engine as if they were local.

The policy and generation stay in the learner's process; only the envs move out, since in
agentic RL it is the envs (sandboxes, repositories, tool servers) that outgrow one machine's
CPUs, as NeMo-RL's environments, each a Ray actor (``MathEnvironment.remote(cfg)``,
NVIDIA-NeMo/RL docs/guides/environments.md). One `EnvWorker` actor hosts several envs
(round-robin by slot) and runs their calls on threads, as the engine's step threads do in process.

Nothing stalls a step: every call waits at most its deadline (`ray.get(timeout=)`). A worker
that misses it, or whose process died, is killed (`ray.kill`, no restart) and replaced by a
fresh actor; every episode that was running on it then ends as an infrastructure failure
(``info["infra_failure"]``, truncated), which the learner drops and counts, and the next
`reset` builds the env anew on the replacement. A worker's sandboxes are owned by its own
process (their owner-pid labels and folder names), so the sweep on start of the next sandbox
on that machine (or ``argym sandbox cleanup``) removes those of a killed worker; a worker
closed in order closes its envs first.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import argym
from argym.errors import ConfigError, InfrastructureError
from argym.types import Message

log = logging.getLogger(__name__)

THREADS_PER_WORKER = 16
"""Concurrent calls one worker runs (its envs step in parallel, as `RolloutEngine`'s step threads do)."""


class EnvWorker:
    """A Ray actor's body: env instances by slot, built from a factory the driver sends."""

    def __init__(self) -> None:
        self._envs: dict[int, Any] = {}

    def pid(self) -> int:
        return os.getpid()

    def make(self, slot: int, factory: Callable[[], Any]) -> None:
        old = self._envs.pop(slot, None)
        if old is not None:
            old.close()
        self._envs[slot] = factory()

    def reset(self, slot: int, seed: int | None, options: dict[str, Any] | None) -> Any:
        return self._envs[slot].reset(seed=seed, options=options)

    def step(self, slot: int, action: Any) -> Any:
        return self._envs[slot].step(action)

    def call(self, slot: int, name: str, args: tuple[Any, ...]) -> Any:
        """``env.get_wrapper_attr(name)(*args)``: `snapshot`, `restore` and the like, through wrappers."""
        return self._envs[slot].get_wrapper_attr(name)(*args)

    def tasks(self, slot: int) -> Any:
        return self._envs[slot].unwrapped.tasks

    def drop(self, slot: int) -> None:
        env = self._envs.pop(slot, None)
        if env is not None:
            env.close()

    def close(self) -> None:
        for slot in list(self._envs):
            self.drop(slot)


@dataclass
class _Worker:
    """One incarnation of a worker: a replacement is a new `_Worker` at the same index."""

    index: int
    actor: Any
    incarnation: int


class RayEnvPool:
    """`workers` EnvWorker actors; `make(env_id, kwargs)` gives the engine a `RemoteEnv` in one of them.

    `call_timeout_s` bounds each `reset`, `step` and wrapper call; `start_timeout_s` bounds an
    env's construction, which includes a fresh worker's start (its process, imports, sandboxes).
    """

    def __init__(
        self,
        workers: int,
        cpus_per_worker: float = 1.0,
        call_timeout_s: float = 600.0,
        start_timeout_s: float = 300.0,
    ):
        from argym.cluster.ray_runtime import check_fits, import_ray

        self._ray = import_ray()
        check_fits(self._ray, "env worker", cpus_per_worker=cpus_per_worker)
        self._actor_class = self._ray.remote(EnvWorker).options(
            num_cpus=cpus_per_worker, max_concurrency=THREADS_PER_WORKER, max_restarts=0
        )
        self.call_timeout_s, self.start_timeout_s = call_timeout_s, start_timeout_s
        self._lock = threading.Lock()
        self._incarnations = itertools.count()
        self._workers = [self._start(i) for i in range(workers)]
        self._slots = itertools.count()
        self.replaced = 0  # workers killed and replaced (timed out or died)
        self.lost_episodes = 0  # episodes ended as infrastructure failures by a lost worker
        self._reported = (0, 0)  # the two counts at the last `metrics()`

    def _start(self, index: int) -> _Worker:
        return _Worker(index, self._actor_class.remote(), next(self._incarnations))

    def make(self, env_id: str, kwargs: dict[str, Any]) -> RemoteEnv:
        """The seam `RolloutEngine(make_env=...)` calls: `argym.make(env_id, **kwargs)` inside a worker."""
        if kwargs.get("executors") is not None:
            raise ConfigError(
                "Ray-hosted envs build their own executors in their worker; got `executors` from this "
                "process. Leave executors unset with cluster.address, or set cluster.address: null."
            )
        return self.env(functools.partial(argym.make, env_id, **kwargs))

    def env(self, factory: Callable[[], Any]) -> RemoteEnv:
        """A `RemoteEnv` whose instance `factory()` builds in a worker (it must pickle: Ray sends it)."""
        return RemoteEnv(self, next(self._slots), factory)

    def worker(self, slot: int) -> _Worker:
        return self._workers[slot % len(self._workers)]

    def call(self, worker: _Worker, method: str, *args: Any, timeout: float | None = None) -> Any:
        """`worker.method(*args)` remotely, within `timeout` (default `call_timeout_s`).

        The env's own exceptions come back as they were raised (Ray's error subclasses the
        cause); a missed deadline or a dead worker replaces it and raises `InfrastructureError`.
        """
        ray = self._ray
        timeout = self.call_timeout_s if timeout is None else timeout
        try:
            return ray.get(getattr(worker.actor, method).remote(*args), timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            why = f"env worker {worker.index}: {method} took longer than its deadline of {timeout:g} s"
        except (
            ray.exceptions.RayActorError,  # its process died (SIGKILL, OOM, crash) or is unreachable
            ray.exceptions.ActorUnschedulableError,
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError,
        ) as e:
            why = f"env worker {worker.index} died during {method}: {type(e).__name__}"
        self._replace(worker, why)
        raise InfrastructureError(why)

    def _replace(self, worker: _Worker, why: str) -> None:
        with self._lock:
            if self._workers[worker.index] is not worker:
                return  # another call on the same worker replaced it already
            log.warning("%s; killing it and starting a replacement", why)
            self._ray.kill(worker.actor, no_restart=True)
            self._workers[worker.index] = self._start(worker.index)
            self.replaced += 1

    def drop(self, slot: int, incarnation: int) -> None:
        """Close `slot`'s env in its worker if that worker is still `incarnation` (else it is gone)."""
        worker = self.worker(slot) if self._workers else None
        if worker is not None and worker.incarnation == incarnation:
            try:
                self.call(worker, "drop", slot, timeout=self.start_timeout_s)
            except InfrastructureError:
                pass  # the worker was lost and replaced: nothing of this env is left to close

    def count_lost(self, why: str) -> None:
        with self._lock:
            self.lost_episodes += 1
        log.warning("an episode ended as an infrastructure failure: %s", why)

    def pids(self) -> list[int]:
        """The worker processes' pids (waits for their start)."""
        return [self.call(w, "pid", timeout=self.start_timeout_s) for w in list(self._workers)]

    def metrics(self) -> dict[str, float]:
        """Workers replaced and episodes lost since the last call (one training step's worth)."""
        with self._lock:
            now = (self.replaced, self.lost_episodes)
            (replaced, lost), self._reported = (now[0] - self._reported[0], now[1] - self._reported[1]), now
        return {"cluster/workers_replaced": float(replaced), "cluster/episodes_lost": float(lost)}

    def close(self, timeout_s: float = 30.0) -> None:
        """Close every worker's envs (their sandboxes go with them), then end the actors."""
        ray = self._ray
        workers, self._workers = self._workers, []
        closing = [w.actor.close.remote() for w in workers]
        ray.wait(closing, num_returns=len(closing), timeout=timeout_s)
        for w in workers:
            ray.kill(w.actor, no_restart=True)


class RemoteEnv:
    """An env in a `RayEnvPool` worker, with the calls `RolloutEngine` makes on a local one.

    A `step` the worker cannot answer (deadline missed, process dead, or the worker replaced
    since this episode's `reset`) returns the episode's last observation, reward 0, truncated,
    and ``info = {"infra_failure": True, "infra_error": why}``: an env's own way to say its
    harness failed, so the episode ends as an infrastructure failure and the others go on. A
    `reset` that cannot run raises `InfrastructureError`, as a local env's failed reset does.
    """

    def __init__(self, pool: RayEnvPool, slot: int, factory: Callable[[], Any]):
        self.pool, self.slot, self._factory = pool, slot, factory
        self._built_on: int | None = None  # the worker incarnation holding this env's instance
        self._episode_on: int | None = None  # the incarnation this episode was reset on
        self._obs: list[Message] = []
        self._tasks: Any = None

    @property
    def unwrapped(self) -> RemoteEnv:
        return self

    @property
    def tasks(self) -> Any:
        """The env's task source, copied once from the worker (sampling tasks stays in this process)."""
        if self._tasks is None:
            self._tasks = self.pool.call(self._built(), "tasks", self.slot)
        return self._tasks

    def _built(self) -> _Worker:
        worker = self.pool.worker(self.slot)
        if self._built_on != worker.incarnation:
            self.pool.call(worker, "make", self.slot, self._factory, timeout=self.pool.start_timeout_s)
            self._built_on = worker.incarnation
        return worker

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        self._episode_on = None
        worker = self._built()
        obs, info = self.pool.call(worker, "reset", self.slot, seed, options)
        self._obs, self._episode_on = obs, worker.incarnation
        return obs, info

    def step(self, action: Any) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        worker = self.pool.worker(self.slot)
        if self._episode_on != worker.incarnation:
            return self._lost(f"env worker {worker.index} was replaced during this episode")
        try:
            result = self.pool.call(worker, "step", self.slot, action)
        except InfrastructureError as e:
            return self._lost(str(e))
        obs, reward, terminated, truncated, info = result
        self._obs = obs
        return obs, reward, terminated, truncated, info

    def _lost(self, why: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        self._episode_on = None
        self.pool.count_lost(why)
        return self._obs, 0.0, False, True, {"infra_failure": True, "infra_error": why}

    def get_wrapper_attr(self, name: str) -> Callable[..., Any]:
        """A remote call of the env's `name` (reached through its wrappers), e.g. `snapshot`, `restore`."""

        def remote(*args: Any) -> Any:
            worker = self._built()
            result = self.pool.call(worker, "call", self.slot, name, args)
            if name == "restore":  # an episode continues from the restored state, on this worker
                self._episode_on = worker.incarnation
            return result

        return remote

    def close(self) -> None:
        """Drop this env in its worker; a worker replaced or closed since has nothing left to close."""
        built_on, self._built_on = self._built_on, None
        if built_on is not None:
            self.pool.drop(self.slot, built_on)
