"""The config module reads recipes without torch, and checks the learner's part names against the registries."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys

import pytest

from argym.algorithms import registry
from argym.algorithms.config import load_config
from argym.errors import ConfigError

CONFIGS = pathlib.Path(__file__).resolve().parents[2] / "configs"


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (what it imports is what the test reads); it must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out


@pytest.mark.parametrize("recipe", ["dapo.yaml", "drgrpo.yaml", "grpo_math.yaml"])
def test_reading_a_recipe_imports_no_torch(recipe):
    code = (
        "import sys\n"
        "from argym.algorithms.config import load_config\n"
        f"cfg = load_config({str(CONFIGS / recipe)!r}, ['algorithm.advantage=rloo'])\n"
        "assert cfg.algorithm.advantage == 'rloo'\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('torch modules:', loaded)\n"
    )
    out = run_python(code)
    assert out.stdout.strip() == "torch modules: []"


def test_reading_a_recipe_imports_none_of_the_code_it_configures():
    """The config reads the strategies' and engines' sections as plain dataclasses (agents/configs.py,
    algorithms/strategy_configs.py): the rollout engine, the endpoint, vLLM's wrapper stay unloaded."""
    code = (
        "import sys\n"
        "from argym.algorithms.config import load_config\n"
        f"load_config({str(CONFIGS / 'r3l_math.yaml')!r}, [])\n"
        "load_config(None, ['rollout.strategy=decomposer'])\n"
        "heavy = ('argym.agents.rollout', 'argym.agents.endpoint', 'argym.agents.program', 'argym.agents.vllm',\n"
        "         'argym.algorithms.r3l.retry', 'argym.algorithms.decomposer')\n"
        "print('loaded:', [m for m in heavy if m in sys.modules])\n"
    )
    out = run_python(code)
    assert out.stdout.strip() == "loaded: []"


def test_a_config_names_an_unknown_part_without_torch():
    code = (
        "import sys\n"
        "from argym.algorithms.learner_config import LearnerConfig\n"
        "from argym.errors import ConfigError\n"
        "try:\n"
        "    LearnerConfig(policy_loss='gspo_tokn')\n"
        "except ConfigError as e:\n"
        "    print(e)\n"
        "print('torch' in sys.modules)\n"
    )
    out = run_python(code)
    assert "Did you mean: gspo_token" in out.stdout and out.stdout.strip().endswith("False")


@pytest.mark.parametrize(
    "table", [registry.ADVANTAGES, registry.POLICY_LOSSES, registry.KL_ESTIMATORS, registry.AGGREGATIONS]
)
def test_every_built_in_name_is_registered_by_the_module_it_names(table):
    for name, module in table._builtins.items():
        importlib.import_module(module)
        assert name in table._items and table._items[name].__module__ == module, (table.kind, name)
    assert callable(table.get(table.names()[0]))
    with pytest.raises(ConfigError, match="Registered:"):
        table.get("no-such-part")


def test_a_built_in_name_cannot_be_taken_before_its_module_loads():
    code = (
        "import sys\n"
        "from argym.algorithms.registry import ADVANTAGES\n"
        "assert 'argym.algorithms.advantages' not in sys.modules\n"
        "try:\n"
        "    ADVANTAGES.register('grpo')(lambda rewards, group_ids, config: rewards)\n"
        "except ValueError as e:\n"
        "    print('refused:', e)\n"
        "print(ADVANTAGES.get('grpo').__module__)\n"
    )
    out = run_python(code)
    assert "refused: A advantage estimator named 'grpo' is already registered" in out.stdout
    assert out.stdout.strip().endswith("argym.algorithms.advantages")


def test_group_size_1_with_a_group_based_advantage_is_refused_naming_those_that_accept_it():
    with pytest.raises(ConfigError) as e:
        load_config(str(CONFIGS / "grpo_math.yaml"), ["rollout.group_size=1"])
    msg = str(e.value)
    assert "rollout.group_size=1" in msg and "'grpo'" in msg and "2 or more" in msg
    assert "reinforce++, returns" in msg and "rloo" not in msg.split("groups of one:")[1]
    cfg = load_config(
        str(CONFIGS / "grpo_math.yaml"), ["rollout.group_size=1", "algorithm.advantage=reinforce++"]
    )
    assert cfg.rollout.group_size == 1


def test_the_group_based_estimators_say_so_in_their_registry_entry():
    needs = {name for name in registry.ADVANTAGES.names() if registry.ADVANTAGES.get(name).needs_groups}
    assert needs == {"grpo", "drgrpo", "rloo", "reinforce++_baseline"}


@pytest.mark.parametrize("recipe", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_every_shipped_recipe_can_draw_its_held_out_tasks(recipe):
    """`argym train configs/X.yaml` evaluates on the env's test split: the recipe's task set must hold it."""
    from argym.agents.evaluate import eval_tasks

    cfg = load_config(CONFIGS / recipe, [])
    tasks = eval_tasks(cfg.env.id, dict(cfg.env.kwargs), "test", cfg.eval.episodes)
    assert len(tasks) >= 1


def test_another_env_does_not_inherit_the_defaults_kwargs(tmp_path):
    """`env.id=reverse_envs:Reverse-v0` kept Math's `tasks: arithmetic(...)` (config.yaml, the curve's title)."""
    assert load_config(None, ["env.id=argym/Code-v0"]).env.kwargs == {}
    # an env.id override applies first: env.kwargs beside it are kept, in either order
    for overrides in (
        ["env.kwargs.max_turns=2", "env.id=argym/Code-v0"],
        ["env.id=argym/Code-v0", "env.kwargs.max_turns=2"],
    ):
        assert load_config(None, overrides).env.kwargs == {"max_turns": 2}
    # the same env keeps its kwargs; a recipe naming another env without kwargs starts afresh, with them keeps them
    assert load_config(None, ["env.id=argym/Math-v0"]).env.kwargs == {
        "tasks": "arithmetic(digits=2,ops=+,terms=2)"
    }
    recipe = tmp_path / "code.yaml"
    recipe.write_text("env:\n  id: argym/Code-v0\n")
    assert load_config(recipe).env.kwargs == {}
    recipe.write_text("env:\n  id: argym/Code-v0\n  kwargs: {timeout_s: 3}\n")
    assert load_config(recipe).env.kwargs == {"timeout_s": 3}
    assert load_config(CONFIGS / "grpo_math.yaml", ["env.id=argym/Code-v0"]).env.kwargs == {}


@pytest.mark.parametrize(
    "override, message",
    [("eval.episodes=0", "eval.episodes must be an integer >= 1"), ("eval.every=-1", "eval.every")],
)
def test_eval_settings_are_refused_at_config_load(override, message):
    # before, eval.episodes=0 passed the config and `argym train` failed only at its first evaluation, after
    # the model load and the vLLM engine start
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])
