"""`argym/Verifiers-v0`: an installed verifiers environment (taskset package) as an argym env.

verifiers 0.4 (`verifiers.v1`) calls an environment's data half a *taskset*:
an installed package exporting a `vf.Taskset` subclass, loaded by id with
`vf.load_environment` (through `resolve_env_config`), the loader its own
``vf-eval`` uses. Its tasks are argym tasks: the prompt (with the task's system prompt
first), the id (the task's own id, else ``NAME#<idx>``), and a split by a
stable hash of the task's key. The task's ``@vf.reward`` functions (with their
weights) and ``@vf.metric`` functions are the grader: the agent's turn is
recorded as a verifiers `Trace` and scored by the task's own `Task.score`, the
call verifiers' rollout makes after a rollout.

Multi-turn environments: a package may also export a `vf.Env` subclass whose
``run(task, agents)`` plays one episode, talking to its one agent through
``agents.<role>.interaction(task)``: ``segment = await interaction.turn(text)``
sends the env's message and returns the agent's reply. argym plays that agent:
each ``turn(text)`` is the env's observation after an assistant turn, and the
episode ends when ``run`` returns; then the task's own rewards are scored on the
whole exchange, beside any reward ``run`` recorded on ``interaction.trace``.
(Cross-agent judgement in ``Env.finalize`` needs several agents; one-agent
envs only.)

Example::

    env = argym.make("argym/Verifiers-v0", env="my_taskset", n=100)   # n= goes to the taskset's config
    obs, info = env.reset(seed=0)          # [system?, user]: the task's prompt
    obs, r, term, trunc, info = env.step("The answer is 42.")
    # info["reward_parts"] == {"correct": 1.0}: weighted rewards (score x weight), summed into r
    # info["verdict"] == {"answer": "The answer is 42.", "rewards": {"correct": {"score": 1.0, "weight": 1.0},
    #                     "brevity": {"score": 0.05, "weight": 0.0}}, "metrics": {"words": 5.0}, ...}

Zero-weight rewards and metrics are in the verdict (logged), not in
`reward_parts` (not trained on). `success` (the pass/fail evaluation counts)
is True when the rewards of the largest weight (the task's main criterion;
``success_reward=NAME`` names another) scored at least 1. A scoring function or an env's ``run`` that
raises, or runs past ``score_timeout_s``, is a grader fault: an infrastructure
failure, never the agent's.

Not supported (a clear `ConfigError` at construction): tasks that need a
container, a runtime or a judge model to be scored, envs with several agents,
and tasks or tasksets with toolsets (tool servers); see docs/interop.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

from argym.envs.base import Reply, TextEnv
from argym.envs.loop import LoopThread, LoopTimeout
from argym.envs.tasks import ListSource, TaskSource, split_of
from argym.errors import ConfigError, MissingDependencyError
from argym.types import Message, Task

DEMO = "argym-verifiers-demo"
"""The default: a small taskset shipped with argym (`argym.envs.verifiers.demo`)."""
DEFAULT_MAX_TASKS = 10_000
"""How many tasks an endless taskset contributes when `max_tasks` is not given."""


def _vf() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError:
        raise MissingDependencyError("verifiers", "verifiers", "argym/Verifiers-v0") from None
    return vf


class VerifiersEnv(TextEnv):
    """A verifiers environment as an argym text env, graded by its tasks' own rewards.

    One answer per episode for a plain taskset; a turn-by-turn exchange for a
    package with its own one-agent `vf.Env`.

    ``env``: the taskset's id (its installed package, as ``vf-eval`` takes it;
    default: a demo shipped with argym, two-digit additions);
    every other unknown keyword goes to the taskset's config (its
    `TasksetConfig` subclass validates it). ``max_tasks`` caps how many tasks
    are read; ``test_fraction`` is the share hashed into the test split.
    """

    def __init__(
        self,
        env: str = DEMO,
        split: str = "train",
        max_turns: int = 8,
        test_fraction: float = 0.1,
        max_tasks: int | None = None,
        score_timeout_s: float = 60.0,
        success_reward: str | None = None,
        render_mode: str | None = None,
        executors: Any = None,
        **env_args: Any,
    ):
        if not isinstance(env, str) or not env:
            raise ConfigError(f"env= must name an installed verifiers taskset package, got {env!r}.")
        if not 0.0 <= float(test_fraction) < 1.0:
            raise ConfigError(f"test_fraction must be in [0, 1), got {test_fraction!r}.")
        if score_timeout_s <= 0:
            raise ConfigError(f"score_timeout_s must be positive, got {score_timeout_s!r}.")
        self.env_id = env
        self.env_args = dict(env_args)
        self.test_fraction = float(test_fraction)
        self.max_tasks = max_tasks
        self.score_timeout_s = float(score_timeout_s)
        self.success_reward = success_reward
        self._vf_tasks: dict[str, Any] = {}
        self._vf_env: Any = None
        self._role: str | None = None
        self._exchange: _Exchange | None = None
        self._loop: LoopThread | None = None
        super().__init__(
            tasks=None, split=split, max_turns=max_turns, render_mode=render_mode, executors=executors
        )

    # ---- tasks -------------------------------------------------------------------------------------
    def load_tasks(self, tasks: Any) -> TaskSource:
        vf = _vf()
        from verifiers.v1.configs.agent import agent_config_fields
        from verifiers.v1.utils.loaders import load_environment, resolve_env_config

        if self.env_id == DEMO:
            from argym.envs.verifiers import demo

            demo.register()
        try:
            env_config = resolve_env_config({"taskset": {**self.env_args, "id": self.env_id}})
            self._vf_env = load_environment(env_config)
        except ModuleNotFoundError as e:
            raise ConfigError(
                f"No verifiers environment {self.env_id!r} is installed: {e}. Install its package "
                f"(pip install <package>) and pass its module name as env=."
            ) from None
        except (TypeError, AttributeError, ValueError) as e:  # not a taskset, or bad env_args (pydantic)
            raise ConfigError(
                f"Cannot load the verifiers environment {self.env_id!r} with {self.env_args}: {e}"
            ) from None
        taskset, config = self._vf_env.taskset, env_config.taskset
        if not isinstance(self._vf_env, vf.SingleAgentEnv):
            roles = list(agent_config_fields(env_config))
            if len(roles) != 1:
                raise ConfigError(
                    f"The verifiers env {type(self._vf_env).__name__} ({self.env_id}) has "
                    f"{len(roles)} agents ({', '.join(roles)}); argym plays one."
                )
            self._role = roles[0]
        if taskset.toolsets(config):
            raise ConfigError(
                f"The verifiers taskset {self.env_id!r} has toolsets (tool servers); "
                f"argym/Verifiers-v0 does not run them yet."
            )
        limit = (
            self.max_tasks if self.max_tasks is not None else (None if taskset.bounded else DEFAULT_MAX_TASKS)
        )
        if limit is not None:
            taskset = taskset.take(int(limit))
        out: list[Task] = []
        for vf_task in taskset:
            self._check_supported(vf_task)
            task = self._to_task(vf, vf_task)
            self._vf_tasks[task.id] = vf_task
            out.append(task)
        if not out:
            raise ConfigError(f"The verifiers taskset {self.env_id!r} yielded no tasks with {self.env_args}.")
        return ListSource(out, name=f"verifiers/{self.env_id}")

    def _check_supported(self, vf_task: Any) -> None:
        import inspect

        def needs_runtime(fn: Any) -> bool:
            param = inspect.signature(fn).parameters.get("runtime")
            return param is not None and param.default is inspect.Parameter.empty

        name = type(vf_task).__name__
        if vf_task.NEEDS_CONTAINER:
            raise ConfigError(
                f"{self.env_id}: its task {name} needs a container; argym/Verifiers-v0 scores "
                f"text-only tasks."
            )
        if type(vf_task).toolsets(vf_task.config):
            raise ConfigError(
                f"{self.env_id}: its task {name} has toolsets (tool servers); "
                f"argym/Verifiers-v0 does not run them yet."
            )
        runtime_fns = [
            fn.__name__ for kind in ("reward", "metric") for fn in vf_task.hooks(kind) if needs_runtime(fn)
        ]
        if runtime_fns or vf_task.plugged_judges():
            raise ConfigError(
                f"{self.env_id}: its task {name} scores with a runtime or a judge model "
                f"({', '.join(runtime_fns) or 'judges'}); argym/Verifiers-v0 scores without either."
            )

    def _to_task(self, vf: Any, vf_task: Any) -> Task:
        data = vf_task.data
        messages: list[Message] = []
        if data.system_prompt:
            messages.append({"role": "system", "content": data.system_prompt})
        if isinstance(data.prompt, str):
            messages.append({"role": "user", "content": data.prompt})
        else:
            messages.extend(m.model_dump(mode="json", exclude_none=True) for m in data.prompt or [])
        if not messages:
            raise ConfigError(
                f"{self.env_id}: task {data.id or data.idx} has no prompt; argym/Verifiers-v0 "
                f"needs tasks that open the conversation."
            )
        task_id = data.id or f"{self.env_id}#{data.idx}"
        return Task(
            id=task_id,
            prompt=tuple(messages),
            split=split_of(vf_task.key, self.test_fraction),
            meta={"source": "verifiers", "env": self.env_id, "key": vf_task.key},
        )

    # ---- episodes and grading -------------------------------------------------------------------------
    @property
    def loop(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread(name="argym-verifiers")
        return self._loop

    def begin(self, task: Task) -> list[Message]:
        messages = super().begin(task)
        self._end_exchange()
        if (
            self._role is not None
        ):  # a multi-turn env: its `run` starts now and waits for the agent's first turn
            self._exchange = _Exchange(_vf(), self._vf_env, self._role, self._vf_tasks[task.id], messages)
            self.loop.run(self._exchange.start())
        return messages

    def respond(self, action: Message) -> Reply:
        if self._exchange is not None:
            return self._respond_multi(action)
        from pydantic import ValidationError

        vf = _vf()
        trace = trace_of(vf, self._vf_tasks[self.task.id], self._messages[:-1])
        try:
            append(vf, trace, action, sampled=True)
        except (
            ValidationError
        ) as e:  # e.g. a tool call whose id or arguments have the wrong type: the agent's
            why = (
                f"Your turn is not a valid chat message: {e.errors()[0].get('msg', e)} at "
                f"{'.'.join(map(str, e.errors()[0].get('loc', ())))}."
            )
            return Reply(
                messages=[{"role": "user", "content": why}],
                reward_parts={"outcome": 0.0},
                verdict={"error": why},
            )
        try:
            self.loop.run(self._vf_tasks[self.task.id].score(trace), timeout_s=self.score_timeout_s)
        except (LoopTimeout, vf.TaskError) as e:  # the taskset's own grader failed: not the agent's fault
            return self._grader_fault(e, trace.last_reply)
        return reply_of(trace, self.success_reward)

    def _respond_multi(self, action: Message) -> Reply:
        exchange = self._exchange
        assert exchange is not None
        try:
            kind, value = self.loop.run(
                exchange.reply(action.get("content") or ""), timeout_s=self.score_timeout_s
            )
        except LoopTimeout as e:
            self._end_exchange()
            return self._grader_fault(e, action.get("content") or "")
        if kind == "message":
            return Reply(messages=[{"role": "user", "content": value}])
        self._exchange = None
        if kind == "error":
            return self._grader_fault(value, exchange.trace.last_reply)
        return reply_of(exchange.trace, self.success_reward)

    def _grader_fault(self, error: BaseException, answer: str) -> Reply:
        why = (
            f"did not finish within {self.score_timeout_s:g} s"
            if isinstance(error, LoopTimeout)
            else f"{type(error).__name__}: {error}"
        )
        return Reply(
            reward_parts={},
            terminated=True,
            infra_failure=True,
            verdict={"error": f"{self.env_id}: {why}", "answer": answer},
        )

    def _end_exchange(self) -> None:
        """Cancel an unfinished multi-turn `run` (the episode was truncated, reset or closed)."""
        if self._exchange is not None and self._loop is not None and self._loop.alive:
            self._loop.run(self._exchange.cancel(), timeout_s=10.0)
        self._exchange = None

    def grader_versions(self) -> dict[str, str]:
        from importlib.metadata import PackageNotFoundError, version

        versions = {"verifiers": version("verifiers")}
        try:
            versions[self.env_id] = version(self.env_id.replace("_", "-"))
        except PackageNotFoundError:
            pass
        return versions

    def close(self) -> None:
        self._end_exchange()
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        super().close()


class _Exchange:
    """One multi-turn episode of a verifiers `Env`: its `run` on the env's loop, with argym as its agent.

    `run` sees ``agents.<role>.interaction(task)``, an async context manager
    whose ``turn(message)`` queues `message` for argym (``outbox``) and waits for
    the agent's next turn (``inbox``), as verifiers' own `Interaction.turn` does
    with a harness; ``trace`` is the live exchange.
    """

    def __init__(self, vf: Any, vf_env: Any, role: str, vf_task: Any, prompt: list[Message]):
        self.vf, self.vf_env, self.vf_task = vf, vf_env, vf_task
        self.trace = trace_of(vf, vf_task, prompt)
        self.agents = type("Agents", (), {role: self})()
        self.inbox: asyncio.Queue[str] | None = None
        self.outbox: asyncio.Queue[tuple[str, Any]] | None = None
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        self.inbox, self.outbox = asyncio.Queue(), asyncio.Queue()
        self.task = asyncio.ensure_future(self._drive())

    async def _drive(self) -> None:
        assert self.outbox is not None
        try:
            await self.vf_env.run(self.vf_task, self.agents)
            await self.vf_task.score(self.trace)
            await self.outbox.put(("done", None))
        except Exception as e:
            await self.outbox.put(("error", e))

    async def reply(self, text: str) -> tuple[str, Any]:
        """Hand the agent's turn to `run`; what comes back: ("message", text), ("done", None) or ("error", exc)."""
        assert self.inbox is not None and self.outbox is not None
        await self.inbox.put(text)
        return await self.outbox.get()

    async def cancel(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    # ---- what `run` sees -------------------------------------------------------------------------------
    def interaction(self, task: Any = None) -> _Exchange:
        return self

    async def __aenter__(self) -> _Exchange:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    async def turn(self, message: Any = None) -> Any:
        from verifiers.v1.agent import Segment

        assert self.inbox is not None and self.outbox is not None
        if message is not None:
            text = message if isinstance(message, str) else "\n\n".join(_text(m) for m in message)
            append(self.vf, self.trace, {"role": "user", "content": text}, sampled=False)
            await self.outbox.put(("message", text))
        reply = await self.inbox.get()
        sent = append(self.vf, self.trace, {"role": "assistant", "content": reply}, sampled=True)
        return Segment(messages=[sent])


def _text(message: Any) -> str:
    """The text of one verifiers message (a model or a dict) that an env sends as its turn."""
    from verifiers.v1.types import content_text

    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    return content if isinstance(content, str) else content_text(content or "")


def append(vf: Any, trace: Any, message: Message, sampled: bool) -> Any:
    """Add `message` to the end of the trace's one branch; returns the verifiers message."""
    from pydantic import TypeAdapter
    from verifiers.v1.graph import MessageNode

    parsed = TypeAdapter(vf.Message).validate_python(dict(message))
    trace.nodes.append(
        MessageNode(parent=len(trace.nodes) - 1 if trace.nodes else None, message=parsed, sampled=sampled)
    )
    return parsed


def trace_of(vf: Any, vf_task: Any, prompt: list[Message]) -> Any:
    """A verifiers `Trace` of `vf_task` holding its prompt (not sampled); `append` adds the turns."""
    from verifiers.v1.trace import AgentInfo, TraceTask

    trace = vf.Trace(
        task=TraceTask(type=type(vf_task).__name__, data=vf_task.data, key=vf_task.key, hash=vf_task.hash),
        agent=AgentInfo(config=vf.AgentConfig()),
    )
    for message in prompt:
        append(vf, trace, message, sampled=False)
    return trace


def reply_of(trace: Any, success_reward: str | None = None) -> Reply:
    """Weighted rewards as reward parts; zero-weight rewards and metrics in the verdict only.

    Success: `success_reward` scored at least 1, else every reward of the largest weight did.
    """
    rewards = {k: r for k, r in trace.rewards.items() if r is not None}
    unscored = sorted(k for k, r in trace.rewards.items() if r is None)
    parts = {k: r.value for k, r in rewards.items() if r.weight != 0}
    if success_reward is not None:
        main = [rewards[success_reward]] if success_reward in rewards else []
    else:
        top = max((r.weight for r in rewards.values()), default=0.0)
        main = [r for r in rewards.values() if r.weight == top and top > 0]
    success = bool(main) and all(r.score >= 1.0 for r in main) and not unscored
    verdict: dict[str, Any] = {
        "answer": trace.last_reply,
        "rewards": {k: {"score": r.score, "weight": r.weight} for k, r in rewards.items()},
        "metrics": {k: v for k, v in trace.metrics.items() if v is not None},
    }
    if unscored:
        verdict["unscored"] = unscored
    return Reply(reward_parts=parts, terminated=True, success=success, verdict=verdict)
