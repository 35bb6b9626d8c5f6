"""`leaderboards/` knows only argym's core (docs/design.md, "Dependencies point one way")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import argym.leaderboards

FORBIDDEN = (
    "argym.agents",
    "argym.envs",
    "argym.algorithms",
    "argym.rewards",
    "argym.cli",
    "torch",
    "transformers",
)


def test_leaderboards_imports_only_the_core():
    folder = Path(argym.leaderboards.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            bad = [n for n in names if n.startswith(FORBIDDEN)]
            assert not bad, f"{path.name} imports {bad}"


def test_importing_and_using_leaderboards_loads_nothing_heavy(tmp_path):
    code = (
        "import sys, argym.leaderboards as lb, argym.leaderboards.server, argym.leaderboards.render\n"
        f"lb.boards(db={str(tmp_path / 'x.sqlite')!r})\n"
        f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_leaderboards_is_not_a_top_level_package(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('leaderboards'))"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.stdout.strip() == "None"
