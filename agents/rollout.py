"""The multi-turn rollout engine.

Runs many episodes at once (tasks × group size), batches generation across
every live episode, steps the envs concurrently, and returns `Trajectory`
objects that keep the invariants of docs/design.md ("Agents and rollouts"):
exact generated ids per turn, a loss mask on policy tokens (end-of-turn
included), per-turn rewards on each turn's last policy token, and a token
budget per episode (the env has no tokenizer; the engine does).

An episode whose env cannot start (`InfrastructureError` from ``reset`` or
``restore``: a sandbox that will not run, a workspace that cannot be built)
is not the policy's doing: it comes back as an infrastructure-failure
trajectory on which nothing was generated (no new turn, no policy token),
which the learner drops and counts and evaluation leaves out of the score,
and the other episodes go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import argym
from argym.agents.policy import Completion, MessageAgent, SamplingParams, TokenPolicy
from argym.agents.renderer import ChatRenderer
from argym.envs.executors import Executors
from argym.errors import InfrastructureError
from argym.types import Message, Task, Trajectory

log = logging.getLogger(__name__)


@dataclass
class Episode:
    """One live episode's bookkeeping, and the token-side steps of a turn (`open`, `take`, `follow`) that
    every driver of episodes shares: the engine's lockstep turns and the streaming scheduler's
    (agents/scheduler.py), which runs each episode on its own."""

    env: Any
    task: Task
    group: int
    obs: list[Message]
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    finish_reason: str = ""
    snapshots: list[Any] | None = None  # env state before each turn, when the caller asked for them
    infra_error: str = ""  # why the env could not start the episode; it is then never driven

    def fail(self, what: str, error: InfrastructureError) -> None:
        """The env's `what` (reset, restore) raised a harness fault: the episode ends unstarted, an infra failure."""
        self.infra_error, self.finish_reason = f"{what} failed: {error}", "infra_failure"
        log.warning("task %r: %s; counted as an infrastructure failure", self.task.id, self.infra_error)

    @classmethod
    def resuming(cls, start: Resume) -> Episode:
        """The episode that continues `start` (its env not yet chosen, then `restore`d to `start.state`)."""
        ep = cls(
            env=None,
            task=start.task,
            group=start.group,
            obs=[m.copy() for m in start.messages],
            turn_rewards=list(start.turn_rewards),
            turn_ends=list(start.turn_ends),
            infos=list(start.infos),
            reward=float(sum(start.turn_rewards)),
        )
        ep.extend(list(start.ids), policy=False)
        return ep

    def reset(self, seed: int) -> None:
        """Start the env on this episode's task; a harness fault makes the episode an infra failure."""
        try:
            self.obs, _ = self.env.reset(seed=seed, options={"task": self.task})
        except InfrastructureError as e:
            self.fail("reset", e)

    def restore(self, state: Any) -> None:
        """Put the env back to `state` (a `Resume`'s); a harness fault makes the episode an infra failure."""
        try:
            self.env.get_wrapper_attr("restore")(state)
        except InfrastructureError as e:
            self.fail("restore", e)

    def snapshot(self) -> None:
        """Before an env step: record the env's state, when the caller asked for snapshots (R³L's pivots)."""
        if self.snapshots is not None:
            self.snapshots.append(self.env.get_wrapper_attr("snapshot")())

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def extend(
        self, ids: list[int], policy: bool, logprobs: list[float] | None = None, version: int = -1
    ) -> None:
        """Append `ids`: sampled by the policy at `version` (mask 1), or context (mask 0, version -1)."""
        self.ids.extend(ids)
        self.mask.extend([1 if policy else 0] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.versions.extend([version if policy else -1] * len(ids))

    def record(
        self, reward: float, terminated: bool, truncated: bool, info: dict[str, Any], obs: list[Message]
    ) -> None:
        self.obs = obs
        self.reward += reward
        self.terminated, self.truncated = terminated, truncated
        self.infos.append(info)
        self.turn_rewards.append(float(reward))

    def open(self, renderer: ChatRenderer, max_total_tokens: int) -> bool:
        """Start the token context with the rendered prompt (a resumed episode comes with its own); False when
        it leaves no room to generate (the episode ends truncated: "prompt_too_long")."""
        if not self.ids:
            self.extend(renderer.prompt_ids(self.obs, tools=self.task.tools), policy=False)
        if len(self.ids) >= max_total_tokens:
            self.truncated, self.finish_reason = True, "prompt_too_long"
            return False
        return True

    def limit(self, sampling: SamplingParams, max_total_tokens: int) -> int:
        """How many tokens this episode's next turn may have: `max_new_tokens`, or what the budget has left."""
        return min(sampling.max_new_tokens, max_total_tokens - len(self.ids))

    def take(self, completion: Completion, version: int) -> None:
        """Append a sampled turn (already cut to `limit`), sampled by the weights of `version`."""
        self.extend(completion.token_ids, policy=True, logprobs=completion.logprobs, version=version)
        self.turn_ends.append(len(self.ids) - 1)
        self.finish_reason = completion.finish_reason

    def follow(self, renderer: ChatRenderer, max_total_tokens: int, turn_ended: bool) -> bool:
        """After the env's step: append its new messages as context for the next turn. False when the
        episode ends here: the env ended it, or the context would leave no room (truncated: "token_budget").
        `turn_ended`: the last turn stopped at its end-of-turn token (else the renderer closes it)."""
        if self.done:
            return False
        new_messages = self.obs[_last_assistant(self.obs) + 1 :]
        more = renderer.continuation_ids(new_messages, tools=self.task.tools, turn_ended=turn_ended)
        if len(self.ids) + len(more) >= max_total_tokens:
            self.truncated, self.finish_reason = True, "token_budget"
            return False
        self.extend(more, policy=False)
        return True

    def trajectory(self) -> Trajectory:
        last = self.infos[-1] if self.infos else {}
        return Trajectory(
            task_id=self.task.id,
            messages=self.obs,
            reward=self.reward,
            success=bool(last.get("success", False)),
            turns=len(self.infos),
            terminated=self.terminated,
            truncated=self.truncated,
            infos=self.infos,
            token_ids=self.ids,
            loss_mask=self.mask,
            sampler_logprobs=self.logprobs,
            policy_versions=self.versions,
            turn_rewards=self.turn_rewards,
            turn_ends=self.turn_ends,
            group=self.group,
            infra_failure=bool(self.infra_error) or any(i.get("infra_failure", False) for i in self.infos),
            finish_reason=self.finish_reason,
            snapshots=self.snapshots if self.snapshots is not None else [],
        )


@dataclass
class Resume:
    """An episode to continue from a restored env state (R³L's retry from the failure point).

    `state` is an `EnvState` taken before turn ``len(turn_ends)``; `messages` the
    conversation at that point; `ids` the exact context to generate from (which
    may hold text the env never saw, e.g. guidance); the earlier turns' rewards,
    ends and infos are carried over. Every id given here gets loss mask 0.
    """

    task: Task
    group: int
    state: Any
    messages: list[Message]
    ids: list[int]
    turn_rewards: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)


class EpisodeRunner(Protocol):
    """Runs episodes of the run's env with its agent: the rollout engine (lockstep turns), or the streaming
    scheduler (agents/scheduler.py: one by one), the same calls on both."""

    @property
    def renderer(self) -> ChatRenderer | None: ...

    @property
    def agent(self) -> Any:
        """The run's generator (a `VersionedGenerator` in training): what a strategy samples its own text with."""

    @property
    def sampling(self) -> SamplingParams: ...

    @property
    def max_total_tokens(self) -> int: ...

    def run(
        self,
        tasks: list[Task],
        group_size: int = 1,
        seed: int = 0,
        sampling: SamplingParams | None = None,
        record_snapshots: bool = False,
    ) -> list[Trajectory]: ...

    def resume(
        self, starts: list[Resume], seed: int = 0, sampling: SamplingParams | None = None
    ) -> list[Trajectory]: ...


class RolloutEngine:
    """Drives one env id with one agent; env instances are pooled and reused across `run` calls.

    The engine owns the `Executors` (worker pools, sandboxes) its envs share: it
    builds them unless `executors` is given (then they stay the caller's), hands
    them to every env it makes, and `close()` closes its envs, then them.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | None,
        agent: TokenPolicy | MessageAgent,
        sampling: SamplingParams | None = None,
        max_total_tokens: int = 2048,
        executors: Executors | None = None,
        step_threads: int = 16,
        make_env: Callable[[str, dict[str, Any]], Any] | None = None,
    ):
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.agent = agent
        self.sampling = sampling or SamplingParams()
        self.max_total_tokens = max_total_tokens
        self._owns_executors = executors is None
        self.executors = executors if executors is not None else Executors()
        # how an env instance is built: here (`argym.make`), or hosted elsewhere behind the same
        # reset/step/close calls (`argym.cluster.RayEnvPool.make`: a Ray actor's env, with deadlines)
        self._make_env = make_env or _make_local
        self.policy_version = 0
        """The version recorded on sampled tokens when the agent does not report one (`generate_versioned`)."""
        self._envs: list[Any] = []
        self._threads = ThreadPoolExecutor(max_workers=step_threads, thread_name_prefix="argym-step")
        self.renderer = ChatRenderer(agent.tokenizer) if isinstance(agent, TokenPolicy) else None

    def _env(self, i: int) -> Any:
        while len(self._envs) <= i:
            self._envs.append(self.new_env())
        return self._envs[i]

    def new_env(self) -> Any:
        """A new instance of the engine's env, built the engine's way; the caller closes it."""
        # a remote env (a Ray worker's) builds its executors where it runs; a local one shares the engine's
        local = {"executors": self.executors} if self._make_env is _make_local else {}
        return self._make_env(self.env_id, {**self.env_kwargs, **local})

    @property
    def task_source(self) -> Any:
        return self._env(0).unwrapped.tasks

    def run(
        self,
        tasks: list[Task],
        group_size: int = 1,
        seed: int = 0,
        sampling: SamplingParams | None = None,
        record_snapshots: bool = False,
    ) -> list[Trajectory]:
        """Roll out `group_size` episodes per task; results are ordered by task, then sample.

        With `record_snapshots`, each trajectory's `snapshots[k]` is the env's
        `snapshot()` before turn k (reached through wrappers), for R³L's retries.
        """
        episodes: list[Episode] = []
        for t, task in enumerate(tasks):
            for _s in range(group_size):
                env = self._env(len(episodes))
                ep = Episode(env=env, task=task, group=t, obs=[], snapshots=[] if record_snapshots else None)
                ep.reset(seed + len(episodes))
                episodes.append(ep)
        return self._drive(episodes, sampling, seed)

    def resume(
        self, starts: list[Resume], seed: int = 0, sampling: SamplingParams | None = None
    ) -> list[Trajectory]:
        """Continue each `Resume` in a pooled env restored to its state; token policies only.

        The returned trajectories hold the given context (mask 0) followed by
        what was generated and replied from there on.
        """
        if self.renderer is None:
            raise ValueError("resume() continues a token context; it needs a token policy.")
        episodes = []
        for i, st in enumerate(starts):
            ep = Episode.resuming(st)
            ep.env = self._env(i)
            ep.restore(st.state)
            episodes.append(ep)
        return self._drive(episodes, sampling, seed)

    def _drive(self, episodes: list[Episode], sampling: SamplingParams | None, seed: int) -> list[Trajectory]:
        started = [ep for ep in episodes if not ep.infra_error]
        if self.renderer is not None:
            self._run_tokens(started, sampling or self.sampling, seed)
        else:
            self._run_messages(started, sampling or self.sampling, seed)
        return [ep.trajectory() for ep in episodes]

    def _step_all(self, episodes: list[Episode], actions: list[Any]) -> None:
        for ep in episodes:
            ep.snapshot()
        results = list(self._threads.map(lambda ea: ea[0].env.step(ea[1]), zip(episodes, actions)))
        for ep, (obs, reward, terminated, truncated, info) in zip(episodes, results):
            ep.record(reward, terminated, truncated, info, obs)

    def _run_messages(self, episodes: list[Episode], sampling: SamplingParams, seed: int) -> None:
        live, turn = episodes, 0
        act_batch = getattr(self.agent, "act_batch", None)  # HTTP agents: concurrent requests, our sampling
        while live:
            if act_batch is not None:
                actions = act_batch(
                    [ep.obs for ep in live],
                    [ep.env.unwrapped for ep in live],
                    sampling,
                    seed + turn * len(episodes),
                )
            else:
                actions = [self.agent.act(ep.obs, ep.env) for ep in live]  # type: ignore[union-attr]
            self._step_all(live, actions)
            live, turn = [ep for ep in live if not ep.done], turn + 1

    def _run_tokens(self, episodes: list[Episode], sampling: SamplingParams, seed: int) -> None:
        renderer, budget = self.renderer, self.max_total_tokens
        assert renderer is not None
        live, turn = [ep for ep in episodes if ep.open(renderer, budget)], 0
        while live:
            limits = [ep.limit(sampling, budget) for ep in live]
            params = replace(sampling, max_new_tokens=max(limits))  # each episode keeps its own limit's worth
            completions, version = self.generate([ep.ids for ep in live], params, seed=seed * 1000 + turn)
            completions = [c.cut(n, renderer.decode) for c, n in zip(completions, limits)]
            for ep, c in zip(live, completions):
                ep.take(c, version)
            self._step_all(live, [c.text for c in completions])
            live = [
                ep
                for ep, c in zip(live, completions)
                if ep.follow(renderer, budget, c.finish_reason == "stop")
            ]
            turn += 1

    def generate(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int
    ) -> tuple[list[Any], int]:
        """The agent's completions and the policy version that sampled them: the agent's own where it
        reports one (`agents.scheduler.VersionedGenerator`), else `policy_version`."""
        versioned = getattr(self.agent, "generate_versioned", None)
        if versioned is not None:
            completions, version = versioned(prompts, sampling, seed=seed)
            return list(completions), int(version)
        return self.agent.generate(prompts, sampling, seed=seed), self.policy_version  # type: ignore[union-attr]

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs.clear()
        self._threads.shutdown(wait=False)
        if self._owns_executors:
            self.executors.close()

    def __enter__(self) -> RolloutEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _make_local(env_id: str, kwargs: dict[str, Any]) -> Any:
    return argym.make(env_id, **kwargs)


def _last_assistant(messages: list[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    raise ValueError("no assistant message in the conversation")
