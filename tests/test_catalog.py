"""`argym recipes`: the shipped recipes, by name, with one line each, from any directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from argym.recipes import find_recipe, recipe_names, summary

REPO = Path(__file__).resolve().parents[1]


def test_recipes_lists_every_shipped_recipe_with_its_description(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "recipes"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # not the checkout: the recipes come with the package
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    for name in recipe_names():
        assert name in out.stdout
    assert "GRPO on two-digit addition with the tiny model" in out.stdout


def test_every_shipped_recipe_has_a_one_sentence_description():
    for name in recipe_names():
        line = summary(find_recipe(name))
        assert line.endswith((".", ")")) and "argym train" not in line, (name, line)
    assert summary(REPO / "configs" / "grpo_math.yaml").startswith("GRPO on two-digit addition")
