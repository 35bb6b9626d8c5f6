"""Packaging: one import package `argym`, a light `import argym`, helpful errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import argym

REPO = Path(__file__).resolve().parents[1]


def run_python(code: str, cwd: Path, *flags: str) -> dict:
    out = subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


FIND_TOP_LEVEL = (
    "import importlib.util, json; "
    "print(json.dumps({n: importlib.util.find_spec(n) is not None for n in "
    "('envs', 'agents', 'algorithms', 'rewards', 'argym', 'argym.envs')}))"
)


def test_no_generic_top_level_packages_are_installed(tmp_path) -> None:
    found = run_python(FIND_TOP_LEVEL, tmp_path)
    assert found == {
        "envs": False,
        "agents": False,
        "algorithms": False,
        "rewards": False,
        "argym": True,
        "argym.envs": True,
    }


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (no cwd on sys.path) needs 3.11")
def test_no_generic_top_level_packages_even_from_the_repo_root() -> None:
    found = run_python(FIND_TOP_LEVEL, REPO, "-P")
    assert not any(found[n] for n in ("envs", "agents", "algorithms", "rewards"))


def test_import_argym_is_light(tmp_path) -> None:
    heavy = ("torch", "transformers", "math_verify", "sympy", "reasoning_gym")
    code = (
        "import sys, json, argym, gymnasium as gym; before = set(sys.modules); "
        "env = gym.make('argym/Math-v0'); env.reset(seed=0); "
        f"print(json.dumps({{'import': sorted(m for m in {heavy!r} if m in before), "
        f"'make': sorted(m for m in {heavy!r} if m in sys.modules)}}))"
    )
    loaded = run_python(code, tmp_path)
    assert loaded == {"import": [], "make": []}


def test_unknown_env_id_suggests_the_close_match() -> None:
    with pytest.raises(argym.UnknownEnvError, match="argym/Math-v0") as e:
        argym.make("argym/Mth-v0")
    assert isinstance(e.value, KeyError) and "Did you mean" in str(e.value)


def test_shipped_recipes_are_the_configs_folder(tmp_path) -> None:
    from argym.recipes import find_recipe, recipe_names

    names = sorted(p.stem for p in (REPO / "configs").glob("*.yaml"))
    assert recipe_names() == names and "grpo_math" in names
    for name in ("grpo_math", "grpo_math.yaml"):
        assert find_recipe(name).read_text() == (REPO / "configs" / "grpo_math.yaml").read_text()
    assert find_recipe("no_such_recipe") is None and find_recipe("../pyproject") is None
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "train", "no_such_recipe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "no shipped recipe" in out.stderr and "grpo_math" in out.stderr


def test_every_package_of_the_tree_is_listed_for_the_wheel() -> None:
    """pyproject.toml lists the packages one by one (the folders map onto `argym.*`): a new subpackage left
    out installs from a checkout but is missing from the wheel (argym.cli once was)."""
    import tomllib

    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setup["packages"])
    found = set()
    for package, folder in setup["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([package, *rel.parts]))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
