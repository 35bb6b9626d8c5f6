"""argym/ToolCall-v0 on the executable source: real tools, every call form, bad input, oracle and random agents."""

from __future__ import annotations

import collections
import itertools
import json
import os
import pickle
import shutil
import signal
import time

import pytest

import argym
from argym.agents.scripted import OracleAgent, RandomAgent
from argym.envs.executors import Executors
from argym.envs.sandbox.base import Sandbox, SandboxError
from argym.envs.toolcall.executable import KINDS, executable_source, make_task
from argym.envs.toolcall.tools import tool_pool

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (apt-get install bubblewrap)",
)


def _call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _play(env, agent, task):
    obs, _ = env.reset(options={"task": task})
    while True:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, env))
        if terminated or truncated:
            return obs, reward, info


def _task(kind: str, split: str = "test"):
    return executable_source(test_size=3, kinds=kind).take(split, 1)[0]


@pytest.fixture
def env():
    e = argym.make("argym/ToolCall-v0", tasks="executable(test_size=40)", timeout_s=2.0)
    yield e
    e.close()


@needs_bwrap
@pytest.mark.parametrize("style", ["hermes", "json", "openai"])
def test_oracle_solves_every_kind_in_every_call_form(style):
    """Grounded (the strictest grading): each answer was in a tool's result, a rounding of one included."""
    env = argym.make("argym/ToolCall-v0", tasks="executable(test_size=40)", oracle_style=style, grounded=True)
    tasks = [_task(k) for k in KINDS] + env.unwrapped.tasks.take("test", 20)
    for task in tasks:
        obs, reward, info = _play(env, OracleAgent(), task)
        assert (reward, info["success"], info["verdict"]["grounded"]) == (1.0, True, True), (
            task.id,
            obs[-3:],
        )
        assert 2 <= info["verdict"]["total_calls"] <= 6
        assert any(m["role"] == "tool" for m in obs) and obs[0]["role"] == "system"


def test_random_agent_scores_near_zero(env):
    agent = RandomAgent(seed=0)
    wins = sum(_play(env, agent, t)[2]["success"] for t in env.unwrapped.tasks.take("test", 40))
    assert wins <= 1


def test_system_message_lists_the_tools_and_the_call_forms(env):
    obs, _ = env.reset(options={"task": _task("order_total")})
    system = obs[0]["content"]
    assert '"name": "kv_get"' in system and '"name": "calculator"' in system and "<tool_call>" in system
    assert '"name": "python"' not in system  # only the task's tools
    assert obs[1]["role"] == "user" and "price:" in obs[1]["content"]


def test_a_worked_episode_with_real_tools(env):
    task = _task("order_total")
    env.reset(options={"task": task})
    store = task.meta["store"]
    key = next(iter(store))
    obs, reward, terminated, truncated, info = env.step(_call("kv_get", key=key))
    assert obs[-1] == {"role": "tool", "tool_call_id": "call_0", "name": "kv_get", "content": store[key]}
    assert (reward, terminated, truncated) == (0.0, False, False) and info["verdict"]["format_ok"]
    obs, *_ = env.step(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "abc",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "6 * (3 + 4)"}'},
                }
            ],
        }
    )
    assert obs[-1]["tool_call_id"] == "abc" and obs[-1]["content"] == "42"
    _, _, terminated, _, info = env.step(f"The total is {int(task.answer):,}.")  # right, but not saved yet
    assert terminated and not info["success"] and info["verdict"]["correct"] is True
    assert info["verdict"]["answer"] == task.answer and info["verdict"]["store_ok"] is False
    env.reset(options={"task": task})
    env.step(_call("kv_set", key="order:total", value=task.answer))
    obs, reward, terminated, truncated, info = env.step(f"The total is {int(task.answer):,}.")
    assert (reward, terminated, info["success"]) == (1.0, True, True) and info["verdict"]["total_calls"] == 1
    assert info["reward_parts"] == {"outcome": 1.0, "format": 0.0, "calls": 0.0}  # shaping off by default


def test_wrong_final_answer_scores_zero(env):
    task = _task("order_total")
    env.reset(options={"task": task})
    _, reward, terminated, _, info = env.step(f"It costs {int(task.answer) + 1}.")
    assert (reward, terminated, info["success"]) == (0.0, True, False)


def test_weekday_answers_must_name_one_day(env):
    task = _task("anniversary_weekday")
    other = next(d for d in ("Monday", "Tuesday") if d != task.answer)
    for text, ok in (
        (f"It was a {task.answer}.", True),
        (f"{task.answer} or {other}", False),
        ("no idea", False),
    ):
        env.reset(options={"task": task})
        assert env.step(text)[4]["success"] is ok


def test_a_grounded_env_pays_only_for_answers_a_tool_gave():
    """`grounded=True`: the right weekday guessed in one turn scores 0, as does one read off an error message or
    a weekday the tool gave for another date (the oracle, whose answers a tool gave, scores 1 on every kind
    grounded: test_oracle_solves_every_kind_in_every_call_form)."""
    env = argym.make("argym/ToolCall-v0", tasks="executable(test_size=5)", grounded=True)
    plain = argym.make("argym/ToolCall-v0", tasks="executable(test_size=5)")
    task = _task("anniversary_weekday")
    guess = f"It was a {task.answer}."
    other = next(f"2024-01-0{d}" for d in range(1, 8) if _weekday_of(f"2024-01-0{d}") != task.answer)
    for before in ([], [_call("weekday", date=task.answer)], [_call("weekday", date=other)]):
        for e, paid in ((env, False), (plain, True)):
            e.reset(options={"task": task})
            for action in before:
                assert not e.step(action)[2]
            _, reward, terminated, _, info = e.step(guess)
            assert terminated and info["verdict"]["correct"] is True
            assert (reward, info["success"], info["verdict"].get("grounded", True)) == (float(paid),) * 2 + (
                paid,
            ), (before, e is env)
    env.close()
    plain.close()


def test_a_grounded_store_task_pays_only_for_a_total_a_tool_gave():
    """A task that also asks for the total to be saved: a guessed total saved with ``kv_set`` (whose result,
    "ok", holds no number) is correct and fills the store, yet is not grounded, so it scores 0 grounded and
    1 graded plainly."""
    task = _task("order_total")
    for grounded in (True, False):
        env = argym.make("argym/ToolCall-v0", tasks="executable(test_size=5)", grounded=grounded)
        env.reset(options={"task": task})
        assert not env.step(_call("kv_set", key="order:total", value=task.answer))[2]
        _, reward, terminated, _, info = env.step(f"The total is {task.answer}.")
        verdict = info["verdict"]
        assert terminated and verdict["correct"] is True and verdict["store_ok"] is True
        assert (reward, info["success"], verdict.get("grounded", True)) == (
            (0.0, False, False) if grounded else (1.0, True, True)
        )
        env.close()


def _weekday_of(date: str) -> str:
    import datetime as dt

    return dt.date.fromisoformat(date).strftime("%A")


def test_shaping_weights_add_format_and_call_parts():
    env = argym.make(
        "argym/ToolCall-v0", tasks="executable(test_size=5)", format_weight=0.1, call_weight=-0.01
    )
    env.reset(options={"task": _task("order_total")})
    _, reward, _, _, info = env.step(_call("kv_get", key="nope") + _call("calculator", expression="1+1"))
    assert info["reward_parts"] == {"format": 0.0, "calls": -0.02} and reward == pytest.approx(-0.02)
    _, reward, _, _, info = env.step(_call("calculator", expression="2+2"))
    assert info["reward_parts"] == {"format": 0.1, "calls": -0.01}


def test_the_verdict_shows_each_part_unweighted_with_its_weight():
    env = argym.make(
        "argym/ToolCall-v0", tasks="executable(test_size=5)", format_weight=0.1, call_weight=-0.01
    )
    env.reset(options={"task": _task("order_total")})
    _, reward, _, _, info = env.step(
        _call("calculator", expression="1+1") + _call("calculator", expression="2")
    )
    assert info["verdict"]["parts"] == {"format": 1.0, "calls": 2.0}
    assert info["verdict"]["weights"] == {"format": 0.1, "calls": -0.01}
    _, reward, _, _, info = env.step("The total is 7.")  # a final answer: the outcome joins the parts
    v = info["verdict"]
    assert v["parts"] == {"outcome": 0.0, "format": 1.0, "calls": 0.0} and v["weights"]["outcome"] == 1.0
    assert info["reward_parts"] == {k: v["weights"][k] * x for k, x in v["parts"].items()}


# ---- bad input: an observation that says what was wrong; the episode goes on ------------------------

BIG = "x" * 1_000_000
DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "action, expected",
    [
        ('{"name": "calculator", "arguments": {"expression": "1+1"', "not valid JSON"),
        (
            '{"name": "calculator", "arguments": {"expression": "1+1"}} thanks!',
            "Text after the tool call JSON",
        ),
        (_call("fly", to="moon"), "Unknown tool 'fly'. Available tools: calculator, kv_get, kv_set."),
        (_call("kv_get"), "missing required argument 'key'"),
        (_call("calculator", expression=12), "argument 'expression' must be string, got a number"),
        (_call("kv_get", key="a", extra=1), "unknown argument 'extra'"),
        (_call("calculator", expression="1+1") * 10_000, "10,000 tool calls; at most 32"),
        ('{"name": "kv_get", "arguments": {"key": ' + DEEP + "}}", "nested too deeply"),
        (_call("kv_get", key=BIG), "over the limit of 100,000 characters"),
        (_call("calculator", expression="1/0"), "calculator failed: Division by zero."),
        (_call("calculator", expression="__import__('os').system('true')"), "calculator failed: Unsupported"),
        (_call("calculator", expression="9**9**9"), "calculator failed: The power is too large."),
        (_call("kv_get", key="price:unobtainium"), "kv_get failed: No key 'price:unobtainium'"),
    ],
)
def test_bad_calls_become_error_observations(env, action, expected):
    env.reset(options={"task": _task("order_total")})
    obs, reward, terminated, truncated, info = env.step(action)
    assert not terminated and not truncated and reward == 0.0 and not info["infra_failure"]
    assert expected in obs[-1]["content"] and obs[-1]["content"].startswith(
        ("Error:", "Your tool call could not")
    )
    assert not info["verdict"]["format_ok"] and any(expected in e for e in info["verdict"]["errors"])
    obs, reward, terminated, *_ = env.step(_call("calculator", expression="2+3"))  # the episode goes on
    assert obs[-1]["content"] == "5" and not terminated


def test_valid_calls_in_a_turn_run_even_when_another_is_bad(env):
    env.reset(options={"task": _task("order_total")})
    obs, *_ = env.step(_call("calculator", expression="2*21") + _call("fly"))
    assert [m["content"] for m in obs[-2:]] == [
        "42",
        "Error: Unknown tool 'fly'. Available tools: calculator, kv_get, kv_set.",
    ]


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("round(1, -10**8)", "ndigits must be an integer"),
        ("round(1, -10**7)", "ndigits must be an integer"),
        ("-" * 999 + "1", "nested too deeply"),
        ("1e999 - 1e999", "out of range"),
        ("99 ** 99 ** 99", "too large"),
    ],
)
def test_hostile_calculator_calls_return_at_once_with_a_clear_observation(env, expression, expected):
    env.reset(options={"task": _task("order_total")})
    t0 = time.perf_counter()
    obs, reward, terminated, truncated, info = env.step(_call("calculator", expression=expression))
    assert time.perf_counter() - t0 < 2.0
    assert obs[-1]["content"].startswith("Error: calculator failed") and expected in obs[-1]["content"]
    assert not terminated and not info["infra_failure"]


def test_stateless_tools_run_in_worker_processes():
    with tool_pool(workers=1) as pool:
        env = argym.make(
            "argym/ToolCall-v0", tasks="executable(test_size=5)", executors=Executors(tools=pool)
        )
        env.reset(options={"task": _task("order_total")})
        obs, *_ = env.step(_call("calculator", expression="6*7"))
        assert obs[-1]["content"] == "42"
        (worker,) = pool._all
        assert worker.proc.pid != os.getpid() and worker.proc.poll() is None


def test_a_tool_past_its_deadline_is_the_agents_failure_and_the_episode_goes_on():
    with tool_pool(workers=1) as pool:
        env = argym.make(
            "argym/ToolCall-v0",
            tasks="executable(test_size=5)",
            timeout_s=0.5,
            executors=Executors(tools=pool),
        )
        env.reset(options={"task": _task("order_total")})
        env.step(_call("calculator", expression="1+1"))
        (worker,) = pool._all
        os.kill(worker.proc.pid, signal.SIGSTOP)  # a worker that never answers, as a hung computation
        t0 = time.perf_counter()
        obs, reward, terminated, _, info = env.step(_call("calculator", expression="1+1"))
        assert time.perf_counter() - t0 < 3.0
        assert obs[-1]["content"] == "Error: calculator did not finish within 0.5 s and was stopped."
        assert not terminated and not info["infra_failure"] and worker.proc.poll() is not None  # killed
        obs, *_ = env.step(_call("calculator", expression="2+3"))  # a fresh worker took its place
        assert obs[-1]["content"] == "5"


def test_a_tool_worker_that_dies_is_an_infrastructure_failure():
    with tool_pool(workers=1) as pool:
        env = argym.make(
            "argym/ToolCall-v0", tasks="executable(test_size=5)", executors=Executors(tools=pool)
        )
        env.reset(options={"task": _task("order_total")})
        env.step(_call("calculator", expression="1+1"))
        (worker,) = pool._all
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait()
        _, reward, terminated, _, info = env.step(_call("calculator", expression="2+2"))
        assert info["infra_failure"] and terminated and reward == 0.0
        assert any(e.startswith("infrastructure:") and "died" in e for e in info["verdict"]["errors"])


@needs_bwrap
def test_python_tool_runs_in_the_sandbox_and_hangs_are_the_agents_failure(env):
    env.reset(options={"task": _task("prime_count")})
    obs, *_ = env.step(_call("python", code="print(sum(range(10)))"))
    assert obs[-1]["content"].strip() == "45"
    obs, reward, terminated, truncated, info = env.step(_call("python", code="while True:\n    pass"))
    assert "did not finish within 2 s" in obs[-1]["content"] and not info["infra_failure"] and not terminated
    obs, *_ = env.step(_call("python", code="raise ValueError('boom')"))
    assert "ValueError: boom" in obs[-1]["content"] and obs[-1]["content"].startswith("Error: python failed")
    import socket

    with socket.socket() as server:  # a host port on loopback only: the sandbox must not reach it
        server.bind(("127.0.0.1", 0))
        server.listen()
        code = f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), 1)"
        obs, *_ = env.step(_call("python", code=code))
    assert obs[-1]["content"].startswith("Error: python failed")  # no network in the sandbox


def test_turn_limit_ends_with_reward_zero():
    env = argym.make("argym/ToolCall-v0", tasks="executable(test_size=5)", max_turns=2)
    env.reset(options={"task": _task("order_total")})
    env.step(_call("calculator", expression="1"))
    _, reward, terminated, truncated, info = env.step(_call("calculator", expression="2"))
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, True, False)


# ---- tasks, splits, snapshots ---------------------------------------------------------------------


def test_tasks_are_seeded_and_splits_disjoint():
    src = executable_source(test_size=100)
    assert make_task(17) == make_task(17) and make_task(17).meta == make_task(17).meta
    test_prompts = {json.dumps(t.prompt) for t in src.take("test", None)}
    train = list(itertools.islice(src.iter_split("train"), 1000))
    assert len(test_prompts) == 100 and not test_prompts & {json.dumps(t.prompt) for t in train}
    kinds = collections.Counter(t.meta["kind"] for t in train)
    assert set(kinds) == set(KINDS)
    for t in train[:200]:  # every plan needs 2-6 calls
        assert 2 <= sum(len(turn) for turn in t.meta["plan"]) <= 6


def test_unknown_kinds_and_sources_are_clear_errors():
    with pytest.raises(argym.ConfigError, match="Unknown executable task kinds"):
        argym.make("argym/ToolCall-v0", tasks="executable(kinds=juggling)")
    with pytest.raises(argym.ConfigError, match="Unknown ToolCall task source 'nope'"):
        argym.make("argym/ToolCall-v0", tasks="nope")


def test_a_users_task_source_is_registered_and_listed():
    """ToolCall's named sources are a Registry table, as Math's and Code's: a user's source is a name away."""
    from dataclasses import replace

    from argym import registry
    from argym.envs.tasks import ListSource
    from argym.envs.toolcall.env import TOOLCALL_SOURCES

    TOOLCALL_SOURCES.add(
        "two_totals",
        lambda: ListSource(
            [replace(make_task(i, ("order_total",)), split="test") for i in range(2)], name="two"
        ),
    )
    try:
        env = argym.make("argym/ToolCall-v0", tasks="two_totals")
        try:
            obs, _ = env.reset(seed=0)
            assert obs
        finally:
            env.close()
        assert {"executable", "bfcl", "two_totals"} <= set(registry.catalog()["ToolCall task source"])
        with pytest.raises(argym.ConfigError, match="Task source bfcl takes categories, per_category"):
            argym.make("argym/ToolCall-v0", tasks="bfcl(foo=1)")
    finally:
        TOOLCALL_SOURCES.remove("two_totals")


def test_snapshot_restores_the_key_value_store_into_a_fresh_env(env):
    env.reset(options={"task": _task("order_total")})
    env.step(_call("kv_set", key="note", value="7"))
    state = pickle.loads(pickle.dumps(env.unwrapped.snapshot()))
    fresh = argym.make("argym/ToolCall-v0", tasks="executable(test_size=40)")
    fresh.unwrapped.restore(state)
    obs, *_ = fresh.step(_call("kv_get", key="note"))
    assert obs[-1]["content"] == "7"


class _BrokenSandbox(Sandbox):
    """A sandbox whose harness fails (what a lost container looks like to the env)."""

    backend = "broken"

    def run(self, argv, **kwargs):
        raise SandboxError("the container was lost")


def test_a_sandbox_that_fails_is_an_infrastructure_failure():
    env = argym.make(
        "argym/ToolCall-v0", tasks="executable(test_size=3,kinds=prime_count)", sandbox=_BrokenSandbox()
    )
    env.reset(options={"task": _task("prime_count")})
    _, reward, terminated, _, info = env.step(_call("python", code="print(1)"))
    assert info["infra_failure"] and terminated and reward == 0.0
    assert "infrastructure: the container was lost" in info["verdict"]["errors"]


def test_schemas_can_be_left_to_the_agents_template():
    env = argym.make("argym/ToolCall-v0", tasks="executable(test_size=5)", schemas_in_prompt=False)
    obs, _ = env.reset(options={"task": _task("order_total")})
    assert (
        obs[0]["content"].startswith("Tools: kv_get, kv_set, calculator.")
        and '"parameters"' not in obs[0]["content"]
    )
    assert env.unwrapped.task.tools[0]["function"]["name"] == "kv_get"  # what the rollout engine renders with


def test_a_real_sandbox_whose_bubblewrap_fails_is_an_infrastructure_failure(broken_bwrap_sandbox):
    env = argym.make(
        "argym/ToolCall-v0", tasks="executable(test_size=3,kinds=prime_count)", sandbox=broken_bwrap_sandbox
    )
    env.reset(options={"task": _task("prime_count")})
    _, reward, terminated, _, info = env.step(_call("python", code="print(1)"))
    assert info["infra_failure"] and terminated and reward == 0.0
    assert any("bubblewrap failed" in e for e in info["verdict"]["errors"])
