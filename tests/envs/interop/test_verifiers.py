"""argym/Verifiers-v0 against the real `verifiers` package (0.4, `verifiers.v1`).

The taskset is written with verifiers' own classes and installed as a module
on sys.path, which is how verifiers' loader finds an installed taskset package.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest
import verifiers.v1 as vf

import argym
from argym.errors import ConfigError

TASKSET = """
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
"""


GUESS = '''
import verifiers.v1 as vf


class GuessData(vf.TaskData):
    secret: int


class GuessTask(vf.Task[GuessData]):
    @vf.reward(weight=0.1)
    async def few_guesses(self, trace: vf.Trace) -> float:
        return 1.0 / max(1, len(trace.assistant_messages))

    @vf.metric
    async def guesses(self, trace: vf.Trace) -> float:
        return float(len(trace.assistant_messages))


class GuessTaskset(vf.Taskset[GuessTask, vf.TasksetConfig]):
    def load(self):
        for i, secret in enumerate([37, 5, 81, 64]):
            yield GuessTask(GuessData(id=f"guess-{i}", secret=secret, prompt="Guess my number from 1 to 100."))


class GuessConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class GuessEnv(vf.Env[GuessConfig]):
    """The env answers each guess with higher/lower until the agent finds the number."""

    async def run(self, task, agents):
        found = False
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                if "EXPLODE" in segment.last_reply:
                    raise RuntimeError("the game engine broke")
                try:
                    guess = int(segment.last_reply)
                except ValueError:
                    segment = await interaction.turn("Reply with a whole number.")
                    continue
                if guess == task.data.secret:
                    found = True
                    break
                segment = await interaction.turn("higher" if guess < task.data.secret else "lower")
        interaction.trace.record_reward("solved", float(found), 1.0)


__all__ = ["GuessTaskset", "GuessEnv"]
'''


def _install(tmp_path, monkeypatch, prefix, source):
    name = prefix + tmp_path.name.replace("-", "_")[-20:]
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.fixture
def taskset(tmp_path, monkeypatch):
    name = _install(tmp_path, monkeypatch, "argym_vf_add_", TASKSET)
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def guess(tmp_path, monkeypatch):
    name = _install(tmp_path, monkeypatch, "argym_vf_guess_", GUESS)
    yield name
    sys.modules.pop(name, None)


def _own_score(env, messages):
    """verifiers' own scoring of a finished conversation: `Task.score` on a trace, as its rollout calls it."""
    from pydantic import TypeAdapter
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, TraceTask

    name = env.unwrapped.env_id
    tasks = vf.load_taskset(vf.taskset_config_type(name)(id=name))
    vf_task = next(t for t in tasks if t.data.id == env.unwrapped.task.id)
    adapter = TypeAdapter(vf.Message)
    nodes = [
        MessageNode(
            parent=i - 1 if i else None, message=adapter.validate_python(m), sampled=m["role"] == "assistant"
        )
        for i, m in enumerate(messages)
    ]
    trace = vf.Trace(
        task=TraceTask(type=type(vf_task).__name__, data=vf_task.data),
        nodes=nodes,
        agent=AgentInfo(config=vf.AgentConfig()),
    )
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
        assert obs == [
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "What is 7 + 7?"},
        ]


@pytest.mark.parametrize("response", ["14", "The sum of seven and seven is 14.", "It is 15", ""])
def test_same_scores_as_verifiers_own(taskset, response):
    with argym.make("argym/Verifiers-v0", env=taskset) as env:
        obs, _ = env.reset(options={"task_id": "add-7"})
        obs, reward, terminated, truncated, info = env.step(response)
        own = _own_score(env, obs)
    assert terminated and not info["infra_failure"]
    assert reward == pytest.approx(own.reward)
    assert info["verdict"]["rewards"] == {
        k: {"score": r.score, "weight": r.weight} for k, r in own.rewards.items()
    }
    assert info["verdict"]["metrics"] == own.metrics
    # weighted rewards are trained on; the zero-weight one and the metric are only logged
    assert set(info["reward_parts"]) == {"correct", "short"}
    assert reward == pytest.approx(sum(info["reward_parts"].values()))
    expected_correct = 1.0 if response.rstrip(".").endswith("14") else 0.0
    expected_short = 1.0 if len(response) <= 20 else 0.0
    assert info["reward_parts"] == {"correct": expected_correct, "short": 0.5 * expected_short}
    assert info["success"] == (expected_correct == 1.0)  # the reward of the largest weight
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


def test_a_multi_turn_env_answers_each_turn_and_scores_the_exchange(guess):
    with argym.make("argym/Verifiers-v0", env=guess) as env:
        obs, _ = env.reset(options={"task_id": "guess-0"})  # secret 37
        assert obs == [{"role": "user", "content": "Guess my number from 1 to 100."}]
        turns = []
        for action in ["50", "twenty", "25", "37"]:
            obs, reward, terminated, truncated, info = env.step(action)
            turns.append(obs[-1])
        assert [m["content"] for m in turns[:3]] == ["lower", "Reply with a whole number.", "higher"]
        assert all(m["role"] == "user" for m in turns[:3]) and turns[3] == {
            "role": "assistant",
            "content": "37",
        }
        assert terminated and not truncated and not info["infra_failure"]
        # the env's own reward (recorded by its run) and the task's weighted one, over the whole exchange
        assert info["reward_parts"] == {"solved": 1.0, "few_guesses": pytest.approx(0.1 / 4)}
        assert reward == pytest.approx(1.025) and info["success"]
        assert info["verdict"]["metrics"] == {"guesses": 4.0}


def test_a_truncated_multi_turn_episode_is_cancelled_and_the_next_one_starts_clean(guess):
    with argym.make("argym/Verifiers-v0", env=guess, max_turns=2) as env:
        env.reset(options={"task_id": "guess-1"})  # secret 5
        env.step("50")
        obs, reward, terminated, truncated, info = env.step("40")
        assert truncated and not terminated and reward == 0.0 and obs[-1]["content"] == "lower"
        env.reset(options={"task_id": "guess-1"})
        obs, reward, terminated, *_ = env.step("5")
        assert terminated and reward == pytest.approx(1.1)


def test_a_multi_turn_env_that_raises_is_an_infrastructure_failure(guess):
    with argym.make("argym/Verifiers-v0", env=guess) as env:
        env.reset(options={"task_id": "guess-2"})
        _, reward, terminated, _, info = env.step("EXPLODE")
    assert terminated and info["infra_failure"] and reward == 0.0
    assert "the game engine broke" in info["verdict"]["error"]


def test_the_default_is_the_demo_taskset_shipped_with_argym():
    with argym.make("argym/Verifiers-v0") as env:
        obs, _ = env.reset(seed=3)
        a, b = (int(x) for x in obs[-1]["content"].removeprefix("What is ").rstrip("?").split(" + "))
        _, reward, terminated, _, info = env.step(str(a + b))
    assert terminated and reward == 1.0 and info["success"]
    assert info["verdict"]["rewards"]["number_only"] == {"score": 1.0, "weight": 0.0}


def test_a_malformed_tool_call_is_an_observation_not_a_crash():
    """A tool call with a non-string id (argym check's bad-input corpus) raised pydantic's ValidationError."""
    with argym.make("argym/Verifiers-v0") as env:
        env.reset(seed=0)
        obs, reward, *_, info = env.step(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": 1, "type": "function", "function": {"name": 5, "arguments": "{not json"}}
                ],
            }
        )
    assert reward == 0 and obs[-1]["role"] == "user" and "not a valid chat message" in obs[-1]["content"]
    assert not info["infra_failure"]
