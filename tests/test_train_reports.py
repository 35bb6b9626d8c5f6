"""What `argym train` tells a user (issue 44, item 7): where the run goes, a held-out figure before training,
the summary in percentages with intervals, and the best checkpoint by the held-out metric kept beside the
last one, which `--agent tiny:RUN_DIR/best` evaluates."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .tiny_run import TINY_RUN

CLI = [sys.executable, "-m", "argym.cli"]


def test_train_prints_its_run_dir_a_before_figure_and_keeps_the_best_checkpoint(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [*TINY_RUN, "steps=2", "eval.every=1", "eval.episodes=4", "rollout.tasks_per_step=2"]
    args += ["rollout.group_size=2", "rollout.max_new_tokens=8", "out_dir=runs/x"]
    out = subprocess.run(
        [*CLI, "train", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("Run directory: runs/x"), lines[:3]
    before = next(i for i, line in enumerate(lines) if line.startswith("Held-out success before training: "))
    first_step = next(i for i, line in enumerate(lines) if line.startswith("step 1/2"))
    assert before < first_step
    assert "% (95% interval " in lines[before] and "n=4" in lines[before]
    summary = json.loads((tmp_path / "runs/x/summary.json").read_text())
    assert summary["before"]["step"] == 0 and summary["before"]["n"] == 4
    # the best of the before, step-1 and final evaluations, the earliest of equals
    best = json.loads((tmp_path / "runs/x/best/best.json").read_text())
    assert summary["best"] == best and best["step"] in (0, 1, 2)
    assert "best " in out.stdout and "kept in runs/x/best" in out.stdout

    from argym.agents.spec import load_agent

    agent = load_agent(f"tiny:{tmp_path / 'runs/x/best'}", seed=0)  # what `--agent tiny:runs/x/best` loads
    assert agent.name == str(tmp_path / "runs/x/best/policy")


def test_the_best_checkpoint_is_replaced_only_by_a_higher_held_out_success(tmp_path):
    from argym.agents.spec import load_agent
    from argym.algorithms.checkpoint import keep_best, read_best

    policy = load_agent("tiny", seed=0)
    assert keep_best(tmp_path, policy, 0, 0.5)
    assert not keep_best(tmp_path, policy, 25, 0.4)
    assert not keep_best(tmp_path, policy, 50, 0.5)  # a tie keeps the earlier
    assert keep_best(tmp_path, policy, 75, 0.7)
    assert not keep_best(tmp_path, policy, 100, 0.6)  # the quickstart's case: best at 75, last at 100
    assert read_best(tmp_path) == {"step": 75, "success": 0.7}
    assert (tmp_path / "best" / "policy" / "config.json").is_file()
