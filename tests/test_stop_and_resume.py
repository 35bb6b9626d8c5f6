"""The quickstart stopped and run again, as a user does it: from a scratch directory outside the repository,
Ctrl-C during the warm start and SIGTERM during RL; each says where the last checkpoint is and the command
that resumes, and that command goes on where the run stopped (issue 44, items 1 and 8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from .tiny_run import TINY_POLICY

ARGS = [
    *TINY_POLICY[:-1],  # the tiny policy; its warm start set here
    "warm_start.tasks=16",
    "warm_start.batch_size=8",
    "warm_start.steps=100",
    "warm_start.checkpoint_every=10",
    "steps=1000",
    "eval.episodes=2",
    "eval.every=0",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=8",
]


def _lines(path: Path) -> int:
    return path.read_text().count("\n") if path.is_file() else 0


def _stop_when(proc: subprocess.Popen, path: Path, lines: int, signum: int) -> tuple[str, str]:
    """Send `signum` once `path` holds `lines` lines; the process's stdout and stderr."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and _lines(path) < lines and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    return proc.communicate(timeout=120)


COMMAND = [sys.executable, "-m", "argym.cli", "quickstart", "--out", "qs", "--no-submit", *ARGS]


def _popen(tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        COMMAND, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _interrupt_the_warm_start(tmp_path: Path) -> int:
    """Ctrl-C part-way through the warm start: its progress was shown, the step in progress checkpointed, and
    the message names that checkpoint and the command; the warm-start step it stopped at."""
    run_dir = tmp_path / "qs"
    proc = _popen(tmp_path)
    out, err = _stop_when(proc, run_dir / "warm_start.jsonl", 15, signal.SIGINT)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "Aborted!" not in err and "Traceback" not in err
    assert "warm start 1/100  loss " in out and " left" in out  # progress and an estimate, in a log too
    stopped_at = torch.load(run_dir / "warm_start" / "warm_start_state.pt", weights_only=False)["step"]
    assert stopped_at >= 15  # the step in progress ended and was checkpointed, not lost
    assert f"the last checkpoint is qs/warm_start (warm start step {stopped_at})" in err, err
    assert "Resume with: argym quickstart --out qs --no-submit policy.tiny" in err, err
    return int(stopped_at)


def test_ctrl_c_in_the_warm_start_says_where_its_checkpoint_is_and_how_to_resume(tmp_path):
    _interrupt_the_warm_start(tmp_path)


@pytest.mark.full(reason="two quickstart processes (stop; resume and stop), from a scratch directory: ~40 s")
def test_quickstart_stopped_in_the_warm_start_and_in_rl_resumes_with_the_same_command(tmp_path):
    run_dir = tmp_path / "qs"
    stopped_at = _interrupt_the_warm_start(tmp_path)
    proc = _popen(tmp_path)  # the same command
    out, err = _stop_when(proc, run_dir / "metrics.jsonl", 1, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert f"resuming at step {stopped_at + 1}" in out, out
    steps = [json.loads(line)["step"] for line in (run_dir / "warm_start.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 101))  # each warm-start step once: the resumed ones after the kept ones
    assert not (run_dir / "warm_start").exists()  # done: the RL checkpoint holds its weights
    assert "stopped by SIGTERM; the last checkpoint is qs/checkpoint (step " in err, err
    assert "Resume with: argym quickstart --out qs" in err and "Traceback" not in err


def test_a_resumed_warm_start_goes_on_as_the_uninterrupted_one(tmp_path):
    """The state `warm_start` checkpoints (optimizer, RNGs, losses) with the weights: resumed from step 3,
    steps 4-6 are the uninterrupted run's to the bit."""
    from argym.agents.hf import HFPolicy
    from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    from argym.algorithms.sft import oracle_sequences, warm_start

    def policy() -> HFPolicy:
        tok, size = (
            build_tiny_tokenizer(),
            TinyModelConfig(hidden_size=32, num_layers=1, intermediate_size=64),
        )
        return HFPolicy(build_tiny_model(tok, size, seed=0), tok, name="tiny")

    seqs = oracle_sequences("argym/Math-v0", {}, policy().renderer, 8, seed=1)
    straight = warm_start(policy(), seqs, 6, 4, 2e-3, seed=2)
    saved: list[dict] = []
    first = policy()
    warm_start(first, seqs, 3, 4, 2e-3, seed=2, save=saved.append)  # its last step is checkpointed
    first.save(tmp_path / "policy")
    resumed = warm_start(HFPolicy.load(tmp_path / "policy"), seqs, 6, 4, 2e-3, seed=2, resume=saved[-1])
    assert saved[-1]["step"] == 3 and resumed == straight


def test_quickstart_help_says_what_its_time_depends_on():
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "quickstart", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "a few minutes" not in out.stdout and "2 CPU cores" in out.stdout, out.stdout
