"""argym/Verifiers-v0 against the real `verifiers` package (0.4, `verifiers.v1`).

The taskset is written with verifiers' own classes and installed as a module
on sys.path, which is how verifiers' loader finds an installed taskset package.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

import argym
from argym.errors import ConfigError

import verifiers.v1 as vf

TASKSET = '''
import verifiers.v1 as vf


class AddData(vf.TaskData):
    answer: str


class AddTask(vf.Task[AddData]):
    @vf.reward(weight=1.0)
    async def correct(self, task: AddData, trace: vf.Trace) -> float:
        words = trace.last_reply.replace(".", " ").split()
        return float(bool(words) and words[-1] == task.answer)

    @vf.reward(weight=0.5)
    async def short(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply) <= 20)

    @vf.reward(weight=0.0)
    async def brevity(self, trace: vf.Trace) -> float:
        return 1.0 / (1 + len(trace.last_reply))

    @vf.metric
    async def words(self, trace: vf.Trace) -> float:
        if "EXPLODE" in trace.last_reply:
            raise RuntimeError("the metric has a bug")
        return float(len(trace.last_reply.split()))


class AddConfig(vf.TasksetConfig):
    n: int = 40


class AddTaskset(vf.Taskset[AddTask, AddConfig]):
    def load(self):
        for i in range(self.config.n):
            yield AddTask(AddData(id=f"add-{i}", prompt=f"What is {i} + {i}?", answer=str(2 * i),
                                  system_prompt="Answer with a number."))


__all__ = ["AddTaskset"]
'''


@pytest.fixture
def taskset(tmp_path, monkeypatch):
    name = "argym_vf_add_" + tmp_path.name.replace("-", "_")[-20:]
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(textwrap.dedent(TASKSET))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def _own_score(env, messages):
    """verifiers' own scoring of a finished conversation: `Task.score` on a trace, as its rollout calls it."""
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, TraceTask
    from pydantic import TypeAdapter

    name = env.unwrapped.env_id
    tasks = vf.load_taskset(vf.taskset_config_type(name)(id=name))
    vf_task = next(t for t in tasks if t.data.id == env.unwrapped.task.id)
    adapter = TypeAdapter(vf.Message)
    nodes = [MessageNode(parent=i - 1 if i else None, message=adapter.validate_python(m),
                         sampled=m["role"] == "assistant") for i, m in enumerate(messages)]
    trace = vf.Trace(task=TraceTask(type=type(vf_task).__name__, data=vf_task.data), nodes=nodes,
                     agent=AgentInfo(config=vf.AgentConfig()))
    asyncio.run(vf_task.score(trace))
    return trace


def test_tasks_prompts_and_splits(taskset):
    with argym.make("argym/Verifiers-v0", env=taskset, n=30) as env:
        tasks = env.unwrapped.tasks
        ids = {t.id for t in tasks.iter_split("all")}
        assert ids == {f"add-{i}" for i in range(30)}  # the env_arg n=30 reached the taskset's config
        train, test = ({t.id for t in tasks.iter_split(s)} for s in ("train", "test"))
        assert train and test and not train & test and train | test == ids
        obs, info = env.reset(options={"task_id": "add-7"})
        assert obs == [{"role": "system", "content": "Answer with a number."},
                       {"role": "user", "content": "What is 7 + 7?"}]


@pytest.mark.parametrize("response", ["14", "The sum of seven and seven is 14.", "It is 15", ""])
def test_same_scores_as_verifiers_own(taskset, response):
    with argym.make("argym/Verifiers-v0", env=taskset) as env:
        obs, _ = env.reset(options={"task_id": "add-7"})
        obs, reward, terminated, truncated, info = env.step(response)
        own = _own_score(env, obs)
    assert terminated and not info["infra_failure"]
    assert reward == pytest.approx(own.reward)
    assert info["verdict"]["rewards"] == {k: {"score": r.score, "weight": r.weight} for k, r in own.rewards.items()}
    assert info["verdict"]["metrics"] == own.metrics
    # weighted rewards are trained on; the zero-weight one and the metric are only logged
    assert set(info["reward_parts"]) == {"correct", "short"}
    assert reward == pytest.approx(sum(info["reward_parts"].values()))
    expected_correct = 1.0 if response.rstrip(".").endswith("14") else 0.0
    expected_short = 1.0 if len(response) <= 20 else 0.0
    assert info["reward_parts"] == {"correct": expected_correct, "short": 0.5 * expected_short}
    assert info["success"] == (expected_correct == 1.0 and expected_short == 1.0)
    assert info["verdict"]["rewards"]["brevity"]["weight"] == 0.0


def test_a_grader_bug_is_an_infrastructure_failure(taskset):
    with argym.make("argym/Verifiers-v0", env=taskset) as env:
        env.reset(options={"task_id": "add-1"})
        _, reward, terminated, _, info = env.step("EXPLODE 2")
    assert terminated and info["infra_failure"] and reward == 0.0
    assert "the metric has a bug" in info["verdict"]["error"]


def test_bad_names_and_args_are_clear_errors(taskset):
    with pytest.raises(ConfigError, match="No verifiers environment 'no_such_vf_env_xyz' is installed"):
        argym.make("argym/Verifiers-v0", env="no_such_vf_env_xyz")
    with pytest.raises(ConfigError, match="Cannot load the verifiers environment"):
        argym.make("argym/Verifiers-v0", env=taskset, n="many")


def test_close_stops_the_scoring_loop(taskset):
    env = argym.make("argym/Verifiers-v0", env=taskset)
    env.reset(seed=0)
    env.step("0")
    loop = env.unwrapped._loop
    assert loop is not None and loop.alive
    env.close()
    assert not loop.alive
