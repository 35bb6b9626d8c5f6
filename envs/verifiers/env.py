"""`argym/Verifiers-v0`: an installed verifiers environment (taskset package) as an argym env.

verifiers 0.4 (`verifiers.v1`) calls an environment's data half a *taskset*:
an installed package exporting a `vf.Taskset` subclass, loaded by id with
`vf.load_taskset(TasksetConfig(id=NAME, ...))`, the loader its own ``vf-eval``
uses. Its tasks are argym tasks: the prompt (with the task's system prompt
first), the id (the task's own id, else ``NAME#<idx>``), and a split by a
stable hash of the task's key. The task's ``@vf.reward`` functions (with their
weights) and ``@vf.metric`` functions are the grader: the agent's turn is
recorded as a verifiers `Trace` and scored by the task's own `Task.score`, the
call verifiers' rollout makes after a rollout.

Example::

    env = argym.make("argym/Verifiers-v0", env="my_taskset", n=100)   # n= goes to the taskset's config
    obs, info = env.reset(seed=0)          # [system?, user]: the task's prompt
    obs, r, term, trunc, info = env.step("The answer is 42.")
    # info["reward_parts"] == {"correct": 1.0}: weighted rewards (score x weight), summed into r
    # info["verdict"] == {"answer": "The answer is 42.", "rewards": {"correct": {"score": 1.0, "weight": 1.0},
    #                     "brevity": {"score": 0.05, "weight": 0.0}}, "metrics": {"words": 5.0}, ...}

Zero-weight rewards and metrics are in the verdict (logged), not in
`reward_parts` (not trained on). `success` is True when every reward of
positive weight scored at least 1. A scoring function that raises or runs past
``score_timeout_s`` is a grader fault: an infrastructure failure, never the
agent's.

Not supported (a clear `ConfigError` at construction): tasks that need a
container or a runtime to be scored, and tasks or tasksets with toolsets
(their tool servers are verifiers' multi-turn env responses in 0.4); see
docs/interop.md.
"""

from __future__ import annotations

from typing import Any

from argym.errors import ConfigError, MissingDependencyError
from argym.types import Message, Task
from argym.envs.base import Reply, TextEnv
from argym.envs.loop import LoopThread, LoopTimeout
from argym.envs.tasks import ListSource, TaskSource, split_of

DEFAULT_MAX_TASKS = 10_000
"""How many tasks an endless taskset contributes when `max_tasks` is not given."""


def _vf() -> Any:
    try:
        import verifiers.v1 as vf
    except ImportError:
        raise MissingDependencyError("verifiers", "verifiers", "argym/Verifiers-v0") from None
    return vf


class VerifiersEnv(TextEnv):
    """A verifiers taskset as a single-answer text env, graded by the taskset's own rewards.

    ``env``: the taskset's id (its installed package, as ``vf-eval`` takes it);
    every other unknown keyword goes to the taskset's config (its
    `TasksetConfig` subclass validates it). ``max_tasks`` caps how many tasks
    are read; ``test_fraction`` is the share hashed into the test split.
    """

    def __init__(self, env: str, split: str = "train", max_turns: int = 1, test_fraction: float = 0.1,
                 max_tasks: int | None = None, score_timeout_s: float = 60.0, render_mode: str | None = None,
                 executors: Any = None, **env_args: Any):
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
        self._vf_tasks: dict[str, Any] = {}
        self._loop: LoopThread | None = None
        super().__init__(tasks=None, split=split, max_turns=max_turns, render_mode=render_mode, executors=executors)

    # ---- tasks -------------------------------------------------------------------------------------
    def load_tasks(self, tasks: Any) -> TaskSource:
        vf = _vf()
        from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

        try:
            config = taskset_config_type(self.env_id).model_validate({**self.env_args, "id": self.env_id})
        except ModuleNotFoundError as e:
            raise ConfigError(f"No verifiers environment {self.env_id!r} is installed: {e}. Install its package "
                              f"(pip install <package>) and pass its module name as env=.") from None
        except (TypeError, AttributeError, ValueError) as e:  # not a taskset, or bad env_args (pydantic)
            raise ConfigError(f"Cannot load the verifiers environment {self.env_id!r} with "
                              f"{self.env_args}: {e}") from None
        taskset = taskset_class(self.env_id)(config)
        if taskset.toolsets(config):
            raise ConfigError(f"The verifiers taskset {self.env_id!r} has toolsets (tool servers); "
                              f"argym/Verifiers-v0 does not run them yet.")
        limit = self.max_tasks if self.max_tasks is not None else (None if taskset.bounded else DEFAULT_MAX_TASKS)
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
            raise ConfigError(f"{self.env_id}: its task {name} needs a container; argym/Verifiers-v0 scores "
                              f"text-only tasks.")
        if type(vf_task).toolsets(vf_task.config):
            raise ConfigError(f"{self.env_id}: its task {name} has toolsets (tool servers); "
                              f"argym/Verifiers-v0 does not run them yet.")
        runtime_fns = [fn.__name__ for kind in ("reward", "metric") for fn in vf_task.hooks(kind) if needs_runtime(fn)]
        if runtime_fns or vf_task.plugged_judges():
            raise ConfigError(f"{self.env_id}: its task {name} scores with a runtime or a judge model "
                              f"({', '.join(runtime_fns) or 'judges'}); argym/Verifiers-v0 scores without either.")

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
            raise ConfigError(f"{self.env_id}: task {data.id or data.idx} has no prompt; argym/Verifiers-v0 "
                              f"needs tasks that open the conversation.")
        task_id = data.id or f"{self.env_id}#{data.idx}"
        return Task(id=task_id, prompt=tuple(messages), split=split_of(vf_task.key, self.test_fraction),
                    meta={"source": "verifiers", "env": self.env_id, "key": vf_task.key})

    # ---- grading -----------------------------------------------------------------------------------
    def respond(self, action: Message) -> Reply:
        vf = _vf()
        vf_task = self._vf_tasks[self.task.id]
        trace = trace_of(vf, vf_task, self._messages)
        if self._loop is None:
            self._loop = LoopThread(name="argym-verifiers")
        try:
            self._loop.run(vf_task.score(trace), timeout_s=self.score_timeout_s)
        except (LoopTimeout, vf.TaskError) as e:  # the taskset's own grader failed: not the agent's fault
            why = f"scoring did not finish within {self.score_timeout_s:g} s" if isinstance(e, LoopTimeout) else str(e)
            return Reply(reward_parts={}, terminated=True, infra_failure=True,
                         verdict={"error": f"{self.env_id}: {why}", "answer": trace.last_reply})
        return reply_of(trace)

    def grader_versions(self) -> dict[str, str]:
        from importlib.metadata import PackageNotFoundError, version

        versions = {"verifiers": version("verifiers")}
        try:
            versions[self.env_id] = version(self.env_id.replace("_", "-"))
        except PackageNotFoundError:
            pass
        return versions

    def close(self) -> None:
        if self._loop is not None:
            self._loop.close()
            self._loop = None
        super().close()


def trace_of(vf: Any, vf_task: Any, messages: list[Message]) -> Any:
    """The conversation as a verifiers `Trace` of `vf_task`: one chain of nodes, assistant turns sampled."""
    from pydantic import TypeAdapter

    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, TraceTask

    adapter = TypeAdapter(vf.Message)
    nodes = [MessageNode(parent=i - 1 if i else None, message=adapter.validate_python(dict(m)),
                         sampled=m.get("role") == "assistant") for i, m in enumerate(messages)]
    return vf.Trace(task=TraceTask(type=type(vf_task).__name__, data=vf_task.data, key=vf_task.key,
                                   hash=vf_task.hash),
                    agent=AgentInfo(config=vf.AgentConfig()), nodes=nodes)


def reply_of(trace: Any) -> Reply:
    """Weighted rewards as reward parts; zero-weight rewards and metrics in the verdict only."""
    rewards = {k: r for k, r in trace.rewards.items() if r is not None}
    unscored = sorted(k for k, r in trace.rewards.items() if r is None)
    parts = {k: r.value for k, r in rewards.items() if r.weight != 0}
    positive = [r for r in rewards.values() if r.weight > 0]
    success = bool(positive) and all(r.score >= 1.0 for r in positive) and not unscored
    verdict: dict[str, Any] = {
        "answer": trace.last_reply,
        "rewards": {k: {"score": r.score, "weight": r.weight} for k, r in rewards.items()},
        "metrics": {k: v for k, v in trace.metrics.items() if v is not None},
    }
    if unscored:
        verdict["unscored"] = unscored
    return Reply(reward_parts=parts, terminated=True, success=success, verdict=verdict)

