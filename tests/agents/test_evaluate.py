"""argym.agents.evaluate: split walking, ordering, scoring, pass@k, infra failures."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import argym
from argym.agents.evaluate import EvalResult, evaluate, score
from argym.agents.policy import SamplingParams
from argym.envs import ListSource, Reply, TextEnv
from argym.errors import ConfigError, InfrastructureError
from argym.types import Task, Trajectory

ECHO = "argym_test/Echo-v0"
N_TEST, N_TRAIN = 5, 7


class EchoEnv(TextEnv):
    """Say the number back. Task q3 (test) is a harness fault when `broken=True`; task q2 cannot start
    (its reset raises `InfrastructureError`, as a sandbox that will not run does) when `unstartable=True`."""

    def __init__(self, broken: bool = False, unstartable: bool = False, **kwargs):
        self.broken, self.unstartable = broken, unstartable
        super().__init__(**kwargs)

    def begin(self, task):
        if self.unstartable and task.id == "q2":
            raise InfrastructureError("the sandbox could not start")
        return super().begin(task)

    def load_tasks(self, tasks):
        return ListSource(
            [
                Task(
                    id=f"q{i}",
                    prompt=({"role": "user", "content": f"Say {i}."},),
                    split="test" if i < N_TEST else "train",
                    answer=str(i),
                )
                for i in range(N_TEST + N_TRAIN)
            ],
            name="echo",
        )

    def respond(self, action):
        if self.broken and self.task.id == "q3":
            return Reply(terminated=True, infra_failure=True, verdict={"error": "grader crashed"})
        ok = action["content"].strip() == self.task.answer
        return Reply(
            reward_parts={"outcome": float(ok)}, terminated=True, success=ok, verdict={"correct": ok}
        )

    def oracle_action(self):
        return self.task.answer


class CoinAgent:
    """Answers right on even task numbers, and on odd ones only for some samples."""

    name = "coin"

    def __init__(self):
        self.calls: dict[str, int] = {}

    def act(self, messages, env):
        task = env.unwrapped.task
        k = self.calls[task.id] = self.calls.get(task.id, 0) + 1
        return task.answer if int(task.answer) % 2 == 0 or k == 1 else "wrong"


@pytest.fixture(scope="module", autouse=True)
def echo_env():
    if ECHO not in gym.registry:
        gym.register(id=ECHO, entry_point=EchoEnv, disable_env_checker=True, order_enforce=False)
    yield
    gym.registry.pop(ECHO, None)


def test_oracle_scores_one_and_walks_the_test_split_in_order():
    r = evaluate(ECHO, {}, "oracle")
    assert isinstance(r, EvalResult)
    assert (r.mean, r.n, r.n_tasks, r.split) == (1.0, N_TEST, N_TEST, "test")
    assert [e["task_id"] for e in r.episodes] == [f"q{i}" for i in range(N_TEST)]
    assert r.mean_reward == 1.0 and r.infra_failures == 0
    assert r.pass_at_k == {}
    assert r.sampling["temperature"] == 0.0  # greedy with one sample per task
    assert r.agent == "oracle"
    assert 0.0 < r.ci_low < 1.0 == r.ci_high  # Wilson: never a point with one sample per task


def test_two_runs_see_the_same_tasks():
    a = evaluate(ECHO, {}, "random", episodes=3, seed=1)
    b = evaluate(ECHO, {}, "random", episodes=3, seed=2)
    assert [e["task_id"] for e in a.episodes] == [e["task_id"] for e in b.episodes] == ["q0", "q1", "q2"]
    assert a.task_hash == b.task_hash


def test_episodes_takes_the_first_n_and_all_when_larger():
    assert evaluate(ECHO, {}, "oracle", episodes=2).n == 2
    r = evaluate(ECHO, {}, "oracle", episodes=1000)
    assert (r.n, r.n_tasks) == (N_TEST, N_TEST)


def test_split_all_and_train():
    r = evaluate(ECHO, {}, "oracle", split="all")
    assert r.n == N_TEST + N_TRAIN and r.split == "all"
    r = evaluate(ECHO, {}, "oracle", split="train")
    assert next(e["task_id"] for e in r.episodes) == f"q{N_TEST}"
    # a split=... env kwarg is the default split
    assert evaluate(ECHO, {"split": "all"}, "oracle").n == N_TEST + N_TRAIN


def test_samples_per_task_gives_pass_at_k():
    r = evaluate(ECHO, {}, CoinAgent(), samples_per_task=3)
    assert set(r.pass_at_k) == {"pass@1", "pass@2", "pass@3"}
    assert r.n == 3 * N_TEST and r.n_tasks == N_TEST
    assert [e["sample"] for e in r.episodes[:3]] == [0, 1, 2]
    assert r.sampling["temperature"] == 1.0  # greedy k samples would be identical
    # even tasks q0 q2 q4: 3/3; odd tasks q1 q3: 1/3 (first sample only)
    assert r.mean == pytest.approx((3 * 3 + 2 * 1) / 15)
    assert r.pass_at_k["pass@1"] == pytest.approx((3 * 1 + 2 * (1 / 3)) / 5)
    assert r.pass_at_k["pass@2"] == pytest.approx((3 * 1 + 2 * (2 / 3)) / 5)
    assert r.pass_at_k["pass@3"] == pytest.approx(1.0)
    assert r.agent == "coin"


def test_greedy_with_several_samples_warns():
    with pytest.warns(UserWarning, match="identical"):
        evaluate(ECHO, {}, "oracle", samples_per_task=2, sampling=SamplingParams(temperature=0.0), episodes=1)


def test_infrastructure_failures_are_counted_not_scored():
    r = evaluate(ECHO, {"broken": True}, "oracle")
    assert r.infra_failures == 1 and r.n == N_TEST - 1 and r.mean == 1.0
    assert [e["infra_failure"] for e in r.episodes] == [False, False, False, True, False]


def test_an_episode_that_cannot_start_is_counted_not_scored(capsys):
    r = evaluate(ECHO, {"unstartable": True}, "oracle")
    assert r.infra_failures == 1 and r.n == N_TEST - 1 and r.mean == 1.0
    assert [(e["infra_failure"], e["turns"]) for e in r.episodes] == [(False, 1)] * 2 + [(True, 0)] + [
        (False, 1)
    ] * 2
    from argym.cli import main

    with pytest.raises(SystemExit) as done:  # `argym eval` reports it too, rather than stopping at the error
        main(["eval", ECHO, "unstartable=true", "--agent", "oracle"])
    out = capsys.readouterr()
    assert done.value.code == 0 and "1 episode(s) were infrastructure failures" in out.err, out


def test_to_dict_is_json():
    d = evaluate(ECHO, {}, "oracle", episodes=2).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["mean"] == 1.0 and d["n"] == 2 and d["env_id"] == ECHO
    assert set(d["episodes"][0]) >= {"task_id", "sample", "success", "reward", "turns", "tokens"}


def test_user_errors():
    with pytest.raises(argym.UnknownEnvError, match="Did you mean"):
        evaluate("argym_test/Ecko-v0", {}, "oracle")
    with pytest.raises(ConfigError, match="Unknown agent spec"):
        evaluate(ECHO, {}, "orcale")
    with pytest.raises(ConfigError):
        evaluate(ECHO, {}, "oracle", split="dev")
    with pytest.raises(ConfigError):
        evaluate(ECHO, {}, "oracle", episodes=0)


def test_score_checks_the_engine_order():
    tasks = [Task(id="a", prompt=()), Task(id="b", prompt=())]
    trajs = [
        Trajectory(
            task_id=t, messages=[], reward=1.0, success=True, turns=1, terminated=True, truncated=False
        )
        for t in ("b", "a")
    ]
    with pytest.raises(InfrastructureError, match="grouped by task"):
        score(
            trajs,
            env_id="x",
            env_kwargs={},
            split="test",
            tasks=tasks,
            samples_per_task=1,
            seed=0,
            agent="a",
            sampling={},
        )


def test_score_all_infra_failures_is_loud():
    tasks = [Task(id="a", prompt=())]
    trajs = [
        Trajectory(
            task_id="a",
            messages=[],
            reward=0.0,
            success=False,
            turns=1,
            terminated=True,
            truncated=False,
            infra_failure=True,
        )
    ]
    with pytest.raises(InfrastructureError, match="infrastructure failures"):
        score(
            trajs,
            env_id="x",
            env_kwargs={},
            split="test",
            tasks=tasks,
            samples_per_task=1,
            seed=0,
            agent="a",
            sampling={},
        )


# ---- on the real Math env ---------------------------------------------------------------


def test_math_oracle_and_order():
    a = evaluate("argym/Math-v0", {}, "oracle", episodes=10)
    b = evaluate("argym/Math-v0", {}, "oracle", episodes=10)
    assert a.mean == 1.0 and a.n == 10
    assert [e["task_id"] for e in a.episodes] == [e["task_id"] for e in b.episodes]


def test_math_procedural_train_split_needs_episodes():
    with pytest.raises(ConfigError, match="endless"):
        evaluate("argym/Math-v0", {}, "oracle", split="train")
    assert evaluate("argym/Math-v0", {}, "oracle", split="train", episodes=3).n == 3


def test_math_jsonl_split_all_and_episodes_past_the_end(tmp_path):
    path = tmp_path / "qa.jsonl"
    rows = [
        {
            "id": f"r{i}",
            "question": f"What is {i} + 1?",
            "answer": str(i + 1),
            "split": "test" if i < 3 else "train",
        }
        for i in range(5)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    r = evaluate("argym/Math-v0", {"tasks": str(path)}, "oracle", episodes=100)
    assert [e["task_id"] for e in r.episodes] == ["r0", "r1", "r2"] and r.mean == 1.0
    r = evaluate("argym/Math-v0", {"tasks": str(path), "max_attempts": 2}, "oracle", split="all")
    assert r.n == 5 and r.n_tasks == 5


def test_the_oracle_of_an_env_without_one_is_a_clear_error(capsys):
    """`argym eval ENV --agent oracle` on an env with no known solutions: one line naming the env, no traceback."""
    from argym.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["eval", "argym/Verifiers-v0", "--agent", "oracle", "--episodes", "1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argym/Verifiers-v0 has no oracle" in err and "Traceback" not in err
