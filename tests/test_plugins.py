"""Plug-in points: a part registered from user code (this module) works end to end at small scale.

Each test registers its parts into scratch copies of the registries (`scratch`), so no
name outlives its test.
"""

from __future__ import annotations

import dataclasses
import re
import types
from pathlib import Path

import gymnasium as gym
import pytest

import argym
from argym import registry
from argym.agents.evaluate import evaluate
from argym.agents.spec import AGENT_SPECS, load_agent, register_agent_spec
from argym.algorithms.config import load_config
from argym.algorithms.strategies import STRATEGIES, build_strategy, combine_metrics, register_strategy
from argym.check.corpus import Exploit, exploits, get, register_exploit, register_family
from argym.envs import ListSource, Reply, TextEnv
from argym.envs.code.tasks import CODE_SOURCES, code_tasks, functions_source
from argym.envs.math.env import MATH_SOURCES, MathEnv
from argym.envs.sandbox.base import SANDBOX_BACKENDS, make_sandbox, register_sandbox_backend
from argym.envs.sandbox.process import ProcessSandbox
from argym.errors import ConfigError
from argym.rewards.compose import REWARD_COMPONENTS, RewardConfig, register_reward
from argym.rewards.prm import PRMS, load_prm, register_prm
from argym.types import Task

REPO = Path(__file__).resolve().parents[1]
SMALL = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.num_heads=2",
    "warm_start.steps=0",
    "rollout.tasks_per_step=3",
    "rollout.group_size=2",
    "rollout.max_new_tokens=6",
    "eval.every=0",
    "algorithm.micro_batch_size=6",
    "steps=1",
]


@pytest.fixture(autouse=True)
def scratch(monkeypatch):
    """Every registry's table swapped for a copy for the test's duration."""
    registry.catalog()  # argym's own parts registered first
    for reg in registry._ALL.values():
        for name in reg._builtins:  # and the lazy built-ins loaded, so the copy holds them (and keeps them)
            reg.get(name)
        monkeypatch.setattr(reg, "_items", dict(reg._items))


def trainer_for(tmp_path, *overrides):
    from argym.algorithms.trainer import Trainer

    return Trainer(load_config(None, SMALL + [f"out_dir={tmp_path}", *overrides]))


# ---------------------------------------------------------------------------- rollout strategies


def docs_example(k: int = 0) -> str:
    """The `k`-th ```python block of docs/design.md's "Plug-in points"."""
    text = (REPO / "docs" / "design.md").read_text()
    section = text[text.index("### Plug-in points") : text.index("\n## ", text.index("### Plug-in points"))]
    return re.findall(r"```python\n(.*?)```", section, re.S)[k]


def test_the_docs_strategy_example_trains(tmp_path):
    module = types.ModuleType("user_strategy")
    exec(compile(docs_example(), "docs/design.md", "exec"), module.__dict__)
    assert "my_retry" in STRATEGIES and "my_retry" in registry.catalog()["rollout strategy"]
    trainer = trainer_for(tmp_path, "rollout.strategy=my_retry")
    try:
        assert isinstance(trainer.strategy, module.RetryFailedGroups)
        metrics = trainer.train_step()
    finally:
        trainer.close()
    # the untrained tiny policy solves nothing: every group is retried once, its retry reaches the
    # learner in the group's place, and a batch of all-failed groups carries no gradient (no AdamW step)
    assert metrics["train/success"] == 0.0 and metrics["my_retry/retried"] == 3.0
    assert metrics["train/trajectories"] == 6.0 and metrics["train/optimizer_steps"] == 0.0


class Alternating:
    """Draw k's groups are all equal (uninformative) for even k, mixed for odd k."""

    def __init__(self, engine):
        self.engine, self.calls = engine, 0

    def run(self, tasks, group_size, seed=0):
        trajs = self.engine.run(tasks, group_size=group_size, seed=seed)
        informative = self.calls % 2 == 1
        self.calls += 1
        trajs = [
            dataclasses.replace(t, reward=float(informative and i % group_size == 0))
            for i, t in enumerate(trajs)
        ]
        return trajs, {"alt/calls": 1.0, "alt/informative": float(informative)}


def test_metrics_of_every_dynamic_sampling_draw_are_combined(tmp_path):
    """Counts are summed over the draws, other metrics averaged; not the last draw's alone."""
    register_strategy("alternating", counts=("alt/calls",))(lambda cfg, engine, policy: Alternating(engine))
    trainer = trainer_for(tmp_path, "rollout.strategy=alternating", "sampling.dynamic=true")
    try:
        _, metrics = trainer.collect()
    finally:
        trainer.close()
    assert metrics["sampling/draws"] == 2.0
    assert metrics["alt/calls"] == 2.0 and metrics["alt/informative"] == 0.5


def test_combine_metrics_rule():
    draws = [{"n": 2.0, "rate": 0.5}, {"n": 3.0, "rate": 1.0, "late": 4.0}]
    assert combine_metrics(draws, frozenset({"n"})) == {"n": 5.0, "rate": 0.75, "late": 4.0}
    assert combine_metrics([]) == {}


def test_the_plain_strategy_is_registered_and_returns_metrics(tmp_path):
    trainer = trainer_for(tmp_path)
    try:
        strategy = build_strategy(trainer.cfg, trainer.engine, trainer.policy)
        trajs, metrics = strategy.run([trainer.engine.task_source.sample(trainer.task_rng, "train")], 2)
    finally:
        trainer.close()
    assert trainer.cfg.rollout.strategy == "plain" and len(trajs) == 2 and metrics == {}


# ---------------------------------------------------------------------------- rewards and PRMs


def test_a_user_reward_component_and_prm_score_a_training_step(tmp_path):
    @register_reward("brevity")
    def brevity(context):
        limit = context.config.rollout.max_new_tokens
        return lambda trajs: [-t.num_policy_tokens / limit for t in trajs]

    @register_prm("constant")
    class ConstantPRM:
        def score(self, trajectory, steps=None):
            return [0.25] * len(steps)

    trainer = trainer_for(
        tmp_path,
        "reward.weights.brevity=0.5",
        "reward.weights.process=0.0",  # logged only
        "reward.prm=constant",
    )
    try:
        metrics = trainer.train_step()
    finally:
        trainer.close()
    assert -1.0 <= metrics["reward/brevity"] < 0.0
    assert metrics["reward/process_min"] == 0.25 and "reward/brevity" in metrics
    assert isinstance(load_prm("constant"), ConstantPRM)


# ---------------------------------------------------------------------------- agents, envs, sandboxes

SAY = "plugin_test/Say-v0"


class SayEnv(TextEnv):
    """Say the task's number back (a user env, registered with gymnasium as argym's own are)."""

    def load_tasks(self, tasks):
        return ListSource(
            [
                Task(
                    id=f"q{i}",
                    prompt=({"role": "user", "content": f"Say {i}."},),
                    split="test",
                    answer=str(i),
                )
                for i in range(4)
            ],
            name="say",
        )

    def respond(self, action):
        ok = action["content"].strip() == self.task.answer
        return Reply(
            reward_parts={"outcome": float(ok)}, terminated=True, success=ok, verdict={"correct": ok}
        )


@pytest.fixture
def say_env():
    gym.register(id=SAY, entry_point=SayEnv, disable_env_checker=True, order_enforce=False)
    yield
    gym.registry.pop(SAY, None)


class Parrot:
    """Always answers the same text."""

    name = "parrot"

    def __init__(self, text: str):
        self.text = text

    def act(self, messages, env):
        return self.text


def test_a_user_agent_spec_evaluates_on_a_user_env(say_env):
    @register_agent_spec("parrot")
    def load(arg, seed):
        return Parrot(arg)

    assert SAY in registry.catalog()["env"] and "parrot" in registry.catalog()["agent spec"]
    result = evaluate(SAY, {}, "parrot:2", episodes=4)
    assert result.mean == 0.25 and isinstance(load_agent("parrot:x"), Parrot)


class CountingSandbox(ProcessSandbox):
    """A process sandbox that counts its runs."""

    runs = 0

    def run(self, *args, **kwargs):
        CountingSandbox.runs += 1
        return super().run(*args, **kwargs)


def test_a_user_sandbox_backend_grades_code():
    register_sandbox_backend("counting")(lambda **kwargs: CountingSandbox(allow_weak=True, **kwargs))
    assert isinstance(make_sandbox("counting"), CountingSandbox)
    env = argym.make("argym/Code-v0", sandbox="counting")
    try:
        env.reset(options={"task_id": "HumanEval/0"})
        before = CountingSandbox.runs
        *_, info = env.step(env.unwrapped.oracle_action())
    finally:
        env.close()
    assert info["success"] and CountingSandbox.runs > before


def test_a_user_task_source_is_a_name_in_tasks():
    @MATH_SOURCES.register("squares")
    def squares(n: int = 3) -> ListSource:
        rows = [
            Task(id=f"sq{i}", prompt=({"role": "user", "content": f"{i}²?"},), answer=str(i * i))
            for i in range(n)
        ]
        return ListSource(rows, name="squares")

    env = MathEnv(tasks="squares(n=4)")
    try:
        env.reset(options={"task_id": "sq3"})
        *_, info = env.step("\\boxed{9}")
    finally:
        env.close()
    assert info["success"] and "squares" in registry.catalog()["math task source"]
    with pytest.raises(ConfigError, match="squares takes n"):
        MathEnv(tasks="squares(m=4)")
    CODE_SOURCES.add("first_two", lambda: ListSource(functions_source(test_size=2).test_tasks(), name="two"))
    assert len(code_tasks("first_two").take("all", None)) == 2
    assert "first_two" in registry.catalog()["code task source"]


def test_a_user_exploit_family_and_its_exploits_are_registered_and_listed():
    register_family("echo", lambda exploit, ctx: [ctx.fill(step) for step in exploit.steps])
    first = register_exploit(Exploit("b-first", "echo", "fake output", ("PASSED",)))
    second = register_exploit(Exploit("a-second", "echo", "fake output", ("ok $port",)))
    assert (
        exploits("echo") == [first, second] and get("echo", "a-second") is second
    )  # in the order registered
    got = registry.catalog()
    assert "echo" in got["exploit family"] and {"echo/b-first", "echo/a-second"} <= set(got["exploit"])
    with pytest.raises(ValueError, match="already registered"):
        register_exploit(first)
    with pytest.raises(ValueError, match="unknown family 'ech'"):
        register_exploit(Exploit("c", "ech", "fake output", ()))


# ---------------------------------------------------------------------------- names and the catalog


@pytest.mark.parametrize(
    ("bad", "fails", "suggests"),
    [
        ("rollout.strategy=r3", lambda v: load_config(None, [v]), "r3l"),
        ("algorithm.advantage=grop", lambda v: load_config(None, [v]), "grpo"),
        ("algo=dapoo", lambda v: load_config(None, [v]), "dapo"),
        ("forma", lambda v: RewardConfig(weights={v: 1.0}), "format"),
        ("rulee", load_prm, "rule"),
        ("orcale", load_agent, "oracle"),
        ("dockr", make_sandbox, "docker"),
    ],
)
def test_unknown_names_suggest_and_list_the_registered_ones(bad, fails, suggests):
    with pytest.raises(ConfigError, match=f"Did you mean: {re.escape(suggests)}") as e:
        fails(bad)
    assert "Registered: " in str(e.value)


def test_the_catalog_lists_every_kind_and_user_parts():
    register_strategy("listed_strategy")(lambda cfg, engine, policy: None)
    got = registry.catalog()
    assert {
        "env",
        "sandbox backend",
        "agent spec",
        "reward component",
        "process reward model",
        "advantage estimator",
        "policy loss",
        "KL estimator",
        "loss aggregation mode",
        "algorithm preset",
        "rollout strategy",
    } <= set(got)
    assert "listed_strategy" in got["rollout strategy"] and "plain" in got["rollout strategy"]
    assert "argym/Math-v0" in got["env"] and "docker" in got["sandbox backend"]
    assert {"outcome", "format", "overlong", "process", "sar"} <= set(got["reward component"])
    for reg in (STRATEGIES, REWARD_COMPONENTS, PRMS, AGENT_SPECS, SANDBOX_BACKENDS):
        assert got[reg.kind] == reg.names()


def test_a_name_is_taken_once():
    with pytest.raises(ValueError, match="already registered"):
        register_strategy("plain")(lambda cfg, engine, policy: None)


def test_the_lower_layers_registries_import_no_torch_and_no_learner(tmp_path):
    """A config names a sandbox, an agent spec, a reward or a strategy without loading torch."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; import argym.registry, argym.envs.sandbox, argym.agents.spec, argym.rewards.compose; "
        "low = sorted(m for m in sys.modules if m.startswith('argym.algorithms')); "
        "import argym.algorithms.strategies; "
        "print(json.dumps({'algorithms': low, 'torch': 'torch' in sys.modules}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"algorithms": [], "torch": False}


def test_the_docs_env_example_is_an_env_argym_evaluates():
    module = types.ModuleType("user_env")
    try:
        exec(compile(docs_example(1), "docs/design.md", "exec"), module.__dict__)
        env = argym.make("me/Reverse-v0")
        obs, info = env.reset(options={"task_id": "gym"})
        _, reward, terminated, _, info = env.step("myg")
        assert (reward, terminated, info["success"]) == (1.0, True, True)
        env.close()
        result = evaluate("me/Reverse-v0", {}, "random", episodes=4)
        assert result.n == 4 and "me/Reverse-v0" in registry.catalog()["env"]
    finally:
        gym.registry.pop("me/Reverse-v0", None)
