"""Agent programs: ordinary functions written against the OpenAI client, run as argym episodes.

A program is ``solve(task, client, tools) -> answer``: `task` is the argym
`Task` whose `prompt` is the env's first observation, `client` an
``openai.OpenAI`` client pointed at argym's endpoint (`agents/endpoint.py`) and
keyed to this episode, `tools` a `ProgramTools` (the task's tool schemas, and
`run` to execute an assistant message's tool calls in the env). The returned
answer (a string, or an assistant message) goes to the env as its final
action, or to the user's reward function (``agent.reward=module:function``,
``reward(task, answer) -> float``).

`ProgramRunner` runs many programs concurrently (one thread each, at most
`concurrency` at once, each with its own deadline) and returns per episode its
outcome and the exact segments the endpoint recorded (`agents/episodes.py`).
It is both a rollout strategy (``rollout.strategy: program``; `run` gives the
learner one trajectory per segment) and, through `ProgramAgent`, an agent
`argym eval` scores (one trajectory per episode).

Failures (docs/agent_programs.md says why):
- a program that raises, or runs past its deadline, scores 0: what the policy
  wrote may be what broke or stalled it, so it is the episode's outcome (a
  deadline is a budget, like `max_total_tokens`); its sampled tokens are trained;
- a program that never called the endpoint is an infrastructure failure: the
  policy was never asked, so there is nothing of its to credit or blame;
- argym's own faults (`InfrastructureError` from an env, the endpoint
  unreachable or failing with a 5xx) are infrastructure failures.
A program past its deadline is abandoned, not waited for: its episode key is
closed (the endpoint answers 410), its tools refuse, and the step goes on.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import argym
from argym.agents.configs import ProgramConfig
from argym.agents.endpoint import EPISODE_HEADER, PolicyEndpoint
from argym.agents.episodes import EpisodeRecord
from argym.agents.policy import SamplingParams
from argym.agents.program_api import ProgramTools, answer_text
from argym.callables import load_function
from argym.envs.executors import Executors
from argym.errors import ConfigError, InfrastructureError
from argym.types import Task, Trajectory


@dataclass
class EpisodeResult:
    """One program episode: its outcome (a trajectory without tokens) and the exact segments it sampled."""

    outcome: Trajectory
    record: EpisodeRecord | None = None
    error: str = ""
    timed_out: bool = False

    def trajectories(self) -> list[Trajectory]:
        """One per recorded segment (none for an infrastructure failure with nothing sampled)."""
        if self.record is None or not self.record.segments:
            return [self.outcome]
        return self.record.trajectories(self.outcome)

    def summary(self) -> Trajectory:
        """The episode as one trajectory (the last segment's tokens): what `argym eval` scores."""
        return self.trajectories()[-1]


@dataclass
class _Live:
    index: int
    task: Task
    group: int
    env: Any
    tools: ProgramTools
    key: str
    thread: threading.Thread = dataclasses.field(init=False)
    started: float = 0.0
    result: Any = None
    error: BaseException | None = None
    tb: str = ""
    finished: bool = False


class ProgramRunner:
    """Runs an agent program on argym tasks with `agent` (a token policy or `openai:` agent) behind an endpoint.

    Like the rollout engine, it owns the `Executors` its envs share and closes them last. Its envs are pooled:
    an episode takes a free one and gives it back when graded, so several `run` calls may be in flight at once
    (the batches running ahead of the learner with partial rollouts, docs/async.md) without sharing an env.
    """

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | None,
        agent: Any,
        program: Callable[..., Any],
        sampling: SamplingParams,
        max_total_tokens: int = 2048,
        training: bool = False,
        deadline_s: float = 300.0,
        concurrency: int = 64,
        reward_fn: Callable[..., Any] | None = None,
    ):
        try:
            import openai
        except ImportError:
            raise ConfigError(
                "Agent programs get an official OpenAI client: pip install 'argym[program]' "
                "(or pip install openai)."
            ) from None
        self._openai = openai
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.program, self.reward_fn = program, reward_fn
        self.deadline_s, self.concurrency = deadline_s, concurrency
        self.endpoint = PolicyEndpoint(agent, sampling, max_total_tokens, require_key=training)
        self.executors = Executors()
        self._envs: list[Any] = []  # every env made and not abandoned (closed on `close`)
        self._free: list[Any] = []
        self._lock = threading.Lock()
        self.first_error = ""

    @classmethod
    def from_config(
        cls,
        env_id: str,
        env_kwargs: dict[str, Any],
        agent: Any,
        cfg: ProgramConfig,
        sampling: SamplingParams,
        max_total_tokens: int,
        training: bool,
    ) -> ProgramRunner:
        if not cfg.program:
            raise ConfigError(
                "rollout.strategy is 'program' but agent.program is empty; set "
                "agent.program=module:function (e.g. agent.program=my_agent:solve)."
            )
        reward = load_function(cfg.reward, "agent.reward") if cfg.reward else None
        return cls(
            env_id,
            env_kwargs,
            agent,
            load_function(cfg.program),
            sampling,
            max_total_tokens,
            training=training,
            deadline_s=cfg.deadline_s,
            concurrency=cfg.concurrency,
            reward_fn=reward,
        )

    @property
    def task_source(self) -> Any:
        env = self._acquire()
        self._release(env)
        return env.unwrapped.tasks

    def _acquire(self) -> Any:
        """A free env of the pool, or a new one."""
        with self._lock:
            if self._free:
                return self._free.pop()
        env = self._make_env()
        with self._lock:
            self._envs.append(env)
        return env

    def _release(self, env: Any) -> None:
        with self._lock:
            self._free.append(env)

    def _make_env(self) -> Any:
        return argym.make(self.env_id, **{**self.env_kwargs, "executors": self.executors})

    # ---- the rollout strategy interface ------------------------------------------------------------

    def run(
        self, tasks: list[Task], group_size: int, seed: int = 0
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """Every episode's segments as trajectories (grouped by task), and the programs' metrics."""
        results = self.run_episodes(tasks, group_size, seed)
        # an episode that sampled nothing (its first prompt was over the token budget) has nothing to train
        trajs = [t for r in results for t in r.trajectories() if t.token_ids or t.infra_failure]
        n = max(len(results), 1)
        recorded = [r.record for r in results if r.record is not None and r.record.segments]
        metrics = {
            "program/errors": sum(
                bool(r.error) and not (r.timed_out or r.outcome.infra_failure) for r in results
            )
            / n,
            "program/timeouts": sum(r.timed_out for r in results) / n,
            "program/infra_failures": sum(r.outcome.infra_failure for r in results) / n,
            "program/segments_per_episode": sum(len(r.segments) for r in recorded) / max(len(recorded), 1),
            "program/requests_per_episode": sum(r.requests for r in recorded) / max(len(recorded), 1),
        }
        return trajs, metrics

    def run_episodes(self, tasks: list[Task], group_size: int = 1, seed: int = 0) -> list[EpisodeResult]:
        """Run the program once per (task, sample), concurrently; results ordered by task, then sample."""
        pending: list[_Live] = []
        for t, task in enumerate(tasks):
            for _ in range(group_size):
                i = len(pending)
                env = self._acquire()
                obs, _ = env.reset(seed=seed + i, options={"task": task})
                shown = dataclasses.replace(task, prompt=tuple(obs))
                record = self.endpoint.open_episode()
                live = _Live(i, shown, t, env, ProgramTools(env, task), record.key)
                live.thread = threading.Thread(
                    target=self._call, args=(live,), daemon=True, name=f"argym-program-{i}"
                )
                pending.append(live)
        results: list[EpisodeResult | None] = [None] * len(pending)
        running: list[_Live] = []
        queue = list(pending)
        while queue or running:
            while queue and len(running) < self.concurrency:
                live = queue.pop(0)
                live.started = time.monotonic()
                live.thread.start()
                running.append(live)
            time.sleep(0.005)
            still = []
            for live in running:
                over = time.monotonic() - live.started > self.deadline_s
                if live.finished or over:
                    results[live.index] = self._finish(live, timed_out=not live.finished)
                    if live.finished:  # an abandoned thread keeps its env
                        self._release(live.env)
                else:
                    still.append(live)
            running = still
        self.endpoint.quiesce()  # no generation may run under the learner's update
        return [r for r in results if r is not None]

    def _call(self, live: _Live) -> None:
        client = self._openai.OpenAI(
            base_url=self.endpoint.url,
            api_key="argym",
            max_retries=0,
            timeout=self.deadline_s,
            default_headers={EPISODE_HEADER: live.key},
        )
        try:
            live.result = self.program(live.task, client, live.tools)
        except BaseException as e:  # the program's own failure; classified in _finish
            live.error, live.tb = e, traceback.format_exc(limit=4)
        finally:
            live.finished = True
            client.close()

    def _finish(self, live: _Live, timed_out: bool) -> EpisodeResult:
        record = self.endpoint.close_episode(live.key)
        tools = live.tools
        tools.close()
        if timed_out:  # the abandoned thread keeps its env: out of the pool, and not closed under it
            with self._lock:
                self._envs.remove(live.env)
        out = Trajectory(
            task_id=live.task.id,
            messages=[],
            reward=0.0,
            success=False,
            turns=record.completions or record.requests,
            terminated=False,
            truncated=False,
            infos=list(tools.infos),
            group=live.group,
        )
        result = EpisodeResult(out, record)
        if timed_out:
            result.error, result.timed_out = (
                f"the program ran past its deadline of {self.deadline_s:g} s",
                True,
            )
            out.truncated, out.finish_reason = True, "deadline"
        elif live.error is not None:
            result.error = f"{type(live.error).__name__}: {live.error}"
            out.finish_reason = "program_error"
            out.infra_failure = self._is_infra(live.error)
            if not self.first_error:
                self.first_error = live.tb
        if record.context_overflow:
            out.truncated, out.finish_reason = True, "token_budget"
        if not record.requests:
            out.infra_failure = True
            result.error = result.error or "the program never called the endpoint"
        if result.error:
            out.infos.append({"program_error": result.error, "infra_failure": out.infra_failure})
            return result
        try:
            self._grade(live, out)
        except InfrastructureError as e:
            out.infra_failure, result.error = True, f"grading failed: {e}"
            out.infos.append({"program_error": result.error, "infra_failure": True})
        return result

    def _is_infra(self, error: BaseException) -> bool:
        """argym's side failed (an env's harness, the endpoint unreachable or erring), not the program."""
        oa = self._openai
        if isinstance(error, (InfrastructureError, oa.APIConnectionError)):
            return True
        return isinstance(error, oa.APIStatusError) and error.status_code >= 500

    def _grade(self, live: _Live, out: Trajectory) -> None:
        """The answer to the env as its final action (unless the env already ended), or to the reward function."""
        tools, answer = live.tools, answer_text(live.result)
        if self.reward_fn is not None:
            try:
                score = float(self.reward_fn(live.task, answer))
            except Exception as e:  # the user's grader is broken: every episode would be mis-scored
                raise ConfigError(
                    f"agent.reward raised {type(e).__name__}: {e} (task {live.task.id!r}); it must "
                    "return a number for any answer string."
                ) from e
            out.reward = tools.reward + score
            out.success, out.terminated = out.reward > 0, True
            return
        if not tools.done:
            obs, reward, terminated, truncated, info = live.env.step(answer)
            tools.record(reward, terminated, truncated, info)
            out.messages = obs
        last = tools.infos[-1] if tools.infos else {}
        out.reward, out.success = tools.reward, bool(last.get("success", False))
        out.terminated, out.truncated, out.infos = tools.terminated, tools.truncated, list(tools.infos)
        out.infra_failure = any(i.get("infra_failure", False) for i in tools.infos)

    def close(self) -> None:
        self.endpoint.close()
        for env in self._envs:
            env.close()
        self._envs.clear()
        self._free.clear()
        self.executors.close()


class ProgramAgent:
    """An agent program with an agent behind its endpoint, as `argym eval` runs it (spec ``program:MOD:FN@SPEC``)."""

    def __init__(self, program: Callable[..., Any], behind: Any, name: str = "", deadline_s: float = 300.0):
        self.program, self.behind, self.deadline_s = program, behind, deadline_s
        self.name = name or f"program:{getattr(program, '__module__', '')}:{getattr(program, '__name__', '')}"
        self.model = getattr(behind, "model", None)

    def run(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        tasks: list[Task],
        samples_per_task: int,
        seed: int,
        sampling: SamplingParams,
        max_total_tokens: int,
    ) -> list[Trajectory]:
        runner = ProgramRunner(
            env_id,
            env_kwargs,
            self.behind,
            self.program,
            sampling,
            max_total_tokens,
            training=False,
            deadline_s=self.deadline_s,
        )
        try:
            return [r.summary() for r in runner.run_episodes(tasks, samples_per_task, seed)]
        finally:
            runner.close()
