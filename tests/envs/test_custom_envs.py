"""Bring your own env: README's example through the CLI (``MODULE:ID``), and a package's entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "argym.cli"]


def readme_env(tmp_path: Path) -> Path:
    """README's "Write your own env" code block, saved as reverse_envs.py in `tmp_path`."""
    section = REPO.joinpath("README.md").read_text().split("## Write your own env", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "reverse_envs.py").write_text(code)
    return tmp_path


def run(*args: str, path: Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def test_readme_env_evaluates_as_module_colon_id(tmp_path):
    where = readme_env(tmp_path / "src")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run(
        "eval", "reverse_envs:Reverse-v0", "--agent", "oracle", "--split", "all", path=where, cwd=elsewhere
    )
    assert out.returncode == 0, out.stderr
    assert "1.000" in out.stdout and re.search(r"episodes \(n\)\s*│\s*10 ", out.stdout), out.stdout
    # an unknown module is one clear line, not a traceback
    out = run("eval", "no_such_mod:Reverse-v0", "--agent", "oracle", path=where, cwd=elsewhere)
    assert out.returncode == 2 and "cannot import module 'no_such_mod'" in out.stderr
    assert "Traceback" not in out.stderr


def as_user(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed `argym` command run in `cwd` with no PYTHONPATH, as a user types the README's commands."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argym = Path(sys.executable).with_name("argym")
    return subprocess.run([argym, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def test_readme_commands_import_the_module_from_the_current_directory(tmp_path):
    """One rule for every command: a module in the current directory is importable (`eval M:ID` could not
    find reverse_envs where `check --import reverse_envs` could)."""
    here = readme_env(tmp_path)
    out = as_user("eval", "reverse_envs:Reverse-v0", "--agent", "oracle", cwd=here)
    assert out.returncode == 0 and "1.000" in out.stdout, out.stderr
    out = as_user("envs", "reverse_envs:Reverse-v0", cwd=here)
    assert out.returncode == 0 and "max_turns" in out.stdout, out.stderr
    out = as_user("check", "Reverse-v0", "--import", "reverse_envs", "--quick", cwd=here)
    assert out.returncode == 0 and "all checks passed" in out.stdout, out.stdout + out.stderr


def test_a_module_colon_id_result_is_submitted_and_a_bad_board_is_refused_first(tmp_path):
    here = readme_env(tmp_path)
    db = tmp_path / "board.sqlite"
    out = as_user(
        "eval", "reverse_envs:Reverse-v0", "--agent", "oracle", "--submit", "--db", str(db), cwd=here
    )
    assert out.returncode == 0 and "submitted as #1" in out.stdout, out.stdout + out.stderr
    out = as_user("board", "reverse_envs:Reverse-v0", "--db", str(db), cwd=here)
    assert out.returncode == 0 and "oracle" in out.stdout, out.stderr
    # a leaderboard file that cannot be opened is refused before the evaluation runs, not after
    (tmp_path / "a_file").write_text("")
    bad = str(tmp_path / "a_file" / "board.sqlite")
    out = as_user("eval", "reverse_envs:Reverse-v0", "--agent", "oracle", "--submit", "--db", bad, cwd=here)
    assert out.returncode == 2 and "cannot open the leaderboard file" in out.stderr, out.stderr
    assert "success rate" not in out.stdout and "Traceback" not in out.stderr


TASK_REWARD = """
import json, os

def exact(traj, task):
    with open(os.environ["SEEN"], "a") as f:
        f.write(json.dumps({"task_id": traj.task_id, "answer": task.answer}) + "\\n")
    return float(traj.messages[-1]["content"].strip() == task.answer)
"""


def test_a_custom_env_trains_with_its_own_kwargs_and_a_reward_that_reads_the_task(tmp_path, monkeypatch):
    """`env.id=M:ID` carries none of Math's kwargs; `reward.weights.M:fn=0.5` is an override, and a reward
    taking ``task`` gets each episode's task (its gold answer), all from a scratch directory."""
    here = readme_env(tmp_path)
    (here / "my_rewards.py").write_text(TASK_REWARD)
    seen, run_dir = tmp_path / "seen.jsonl", tmp_path / "run"
    monkeypatch.setenv("SEEN", str(seen))
    out = as_user(
        "train",
        *["env.id=reverse_envs:Reverse-v0", "reward.weights.my_rewards:exact=0.5"],
        *["steps=1", "warm_start.steps=0", "eval.episodes=2", "rollout.tasks_per_step=2"],
        *["rollout.group_size=2", "rollout.max_new_tokens=8", f"out_dir={run_dir}"],
        cwd=here,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["env"] == {"id": "reverse_envs:Reverse-v0", "kwargs": {}}
    assert config["reward"]["weights"]["my_rewards:exact"] == 0.5
    rows = [json.loads(line) for line in seen.read_text().splitlines()]
    assert len(rows) >= 4 and all(r["answer"] == r["task_id"][::-1] for r in rows), rows


def test_readme_env_in_a_recipe_loads(tmp_path, monkeypatch):
    """``env.id: MODULE:ID`` in a recipe: the env the trainer makes is the user's."""
    import argym

    monkeypatch.syspath_prepend(str(readme_env(tmp_path)))
    from argym.algorithms.config import load_config

    recipe = tmp_path / "reverse.yaml"
    recipe.write_text("env:\n  id: reverse_envs:Reverse-v0\n  kwargs: {}\nsteps: 1\n")
    cfg = load_config(recipe)
    with argym.make(cfg.env.id, **cfg.env.kwargs, split="all") as env:
        obs, _ = env.reset(seed=0)
        assert obs[0]["content"].startswith("Reverse: ")
        assert env.step(env.unwrapped.oracle_action())[1] == 1.0


@pytest.mark.slow
def test_readme_env_trains(tmp_path):
    where = readme_env(tmp_path / "src")
    out = run(
        "train",
        "env.id=reverse_envs:Reverse-v0",
        *["steps=1", "warm_start.steps=1", "warm_start.tasks=4", "eval.episodes=2"],
        *["rollout.tasks_per_step=2", "rollout.group_size=2"],
        f"out_dir={tmp_path / 'run'}",
        path=where,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "run" / "summary.json").is_file()


def test_an_installed_packages_entry_point_lists_its_env(tmp_path):
    """A package declaring an `argym.envs` entry point: its envs appear in `argym envs`, no --import needed."""
    (tmp_path / "word_envs.py").write_text(
        (readme_env(tmp_path) / "reverse_envs.py").read_text().replace('"Reverse-v0"', '"word/Reverse-v0"')
    )
    dist = tmp_path / "word_envs-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: word-envs\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[argym.envs]\nword = word_envs\n")
    out = run("envs", path=tmp_path, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "word/Reverse-v0" in out.stdout and "Reverse a word" in out.stdout
    assert "argym/Math-v0" in out.stdout
    out = run("envs", "word/Reverse-v0", path=tmp_path, cwd=tmp_path)
    assert out.returncode == 0 and "max_turns" in out.stdout and "int" in out.stdout, out.stderr
    out = run("eval", "word/Reverse-v0", "--agent", "oracle", "--split", "all", path=tmp_path, cwd=tmp_path)
    assert out.returncode == 0 and "1.000" in out.stdout, out.stderr
