"""Exact resume in async mode: an async run killed (SIGKILL) again and again, then resumed, trains what the
uninterrupted run trains. With a fixed lag (rollout.partial=false) the weights are equal bit for bit; with
partial rollouts (whose samples depend on thread timing) no task is dropped or trained twice: the trained task
ids form the same multiset. The checkpoint holds the batches collected ahead of the learner (docs/async.md).

Each run is a child forked from the test process (no interpreter start, so a run takes seconds) and killed with
SIGKILL once its log shows a given step."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from argym.agents.hf import HFPolicy
from argym.algorithms.checkpoint import find_checkpoint
from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer  # imported here, so each forked run starts at once

from ..tiny_run import TINY_RUN

RUN = [
    *TINY_RUN,
    "rollout.tasks_per_step=3",
    "rollout.group_size=3",
    "rollout.max_new_tokens=6",
    "eval.episodes=2",
    "eval.every=0",
    "algorithm.micro_batch_size=5",
    "algorithm.num_minibatches=1",
    "algorithm.entropy_coef=0.01",  # every step has a gradient, so a batch trained differently shows
    "algorithm.tis_cap=2.0",
    "log.samples_per_step=100",  # every trained trajectory in samples.jsonl
    "checkpoint_every=1",  # every checkpoint holds batches collected ahead
    "rollout.mode=async",
]


def _train(overrides: list[str]) -> None:
    torch.set_num_threads(1)
    trainer = Trainer(load_config(None, overrides))  # the training loop alone (no final evaluation or plot)
    try:
        trainer.fit()
    finally:
        trainer.close()


def _logged_steps(run: Path) -> int:
    try:
        return len((run / "metrics.jsonl").read_text().splitlines())
    except FileNotFoundError:
        return 0


def _run(out: Path, overrides: list[str], kill_at: int | None = None) -> None:
    """Train in a forked child; `kill_at`: SIGKILL it once `kill_at` steps are logged (the step's checkpoint is
    written right after its log line, so the kill lands before, during or after that write)."""
    child = multiprocessing.get_context("fork").Process(
        target=_train, args=([*RUN, *overrides, f"out_dir={out}"],)
    )
    child.start()
    deadline = time.monotonic() + 300
    if kill_at is not None:
        while _logged_steps(out) < kill_at and child.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.is_alive(), f"the run ended before step {kill_at}"
        os.kill(child.pid, 9)  # SIGKILL: nothing of the run's own runs after it
    child.join(timeout=300)
    assert child.exitcode == (-9 if kill_at is not None else 0), child.exitcode


def _killed_and_resumed(
    tmp_path: Path, overrides: list[str], kills: list[int], steps: int, lag: int
) -> tuple[Path, Path]:
    """The uninterrupted run, and a run killed once `kills[i]` steps are logged, each time resumed."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    _run(straight, [*overrides, f"steps={steps}", f"rollout.max_staleness={lag}"])
    for at in kills:
        _run(killed, [*overrides, f"steps={steps}", f"rollout.max_staleness={lag}"], kill_at=at)
        # the newest complete checkpoint, as a resume finds it: a kill between save_checkpoint's two renames
        # leaves `checkpoint.old` and no `checkpoint`
        ckpt = find_checkpoint(killed)
        assert ckpt is not None, sorted(p.name for p in killed.iterdir())
        state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
        n = state["step"]  # the checkpoint holds the batches of the `lag` steps after it that the run has
        assert at - 1 <= n < steps and sorted(state["pending_batches"]) == list(range(n, min(n + lag, steps)))
    _run(killed, [*overrides, f"steps={steps}", f"rollout.max_staleness={lag}"])  # resumes and finishes
    return straight, killed


def _rows(run: Path, name: str) -> list[dict]:
    return [json.loads(x) for x in (run / name).read_text().splitlines()]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return HFPolicy.load(run / "checkpoint" / "policy").model.state_dict()


def test_fixed_lag_resumes_exactly_after_repeated_sigkills(tmp_path):
    """rollout.partial=false, lag 2: after two kills the weights, losses and trained samples equal the
    uninterrupted run's (before the checkpoint held the batches collected ahead, the resumed run drew new
    tasks for them, sampled by the checkpoint's weights rather than the older ones)."""
    straight, killed = _killed_and_resumed(tmp_path, ["rollout.partial=false"], kills=[2, 4], steps=6, lag=2)
    a, b = _weights(straight), _weights(killed)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    ma, mb = _rows(straight, "metrics.jsonl"), _rows(killed, "metrics.jsonl")
    assert [r["step"] for r in mb if "train/loss" in r] == list(range(1, 7))
    for x, y in zip(ma, mb):
        for key in ("train/loss", "train/reward", "train/version_lag_mean", "train/response_tokens"):
            assert x.get(key) == y.get(key), (key, x["step"])
    assert _rows(killed, "samples.jsonl") == _rows(straight, "samples.jsonl")


def test_partial_rollouts_resume_without_dropping_or_repeating_a_task(tmp_path):
    """Partial rollouts, staleness 2: the trained task ids (each step's, over the run) form the uninterrupted
    run's multiset after two kills."""
    straight, killed = _killed_and_resumed(tmp_path, [], kills=[2, 4], steps=6, lag=2)

    def trained(run: Path) -> Counter[str]:
        return Counter(s["task_id"] for s in _rows(run, "samples.jsonl"))

    want = trained(straight)
    assert sum(want.values()) == 6 * 3 * 3 and len(want) > 3 * 3
    assert trained(killed) == want
    assert [r["step"] for r in _rows(killed, "metrics.jsonl") if "train/loss" in r] == list(range(1, 7))


@pytest.mark.full(reason="a longer run killed five times; CI kills the 6-step run twice")
def test_fixed_lag_resumes_exactly_after_five_sigkills(tmp_path):
    straight, killed = _killed_and_resumed(
        tmp_path, ["rollout.partial=false"], kills=[2, 4, 6, 8, 10], steps=14, lag=3
    )
    a, b = _weights(straight), _weights(killed)
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    assert _rows(killed, "samples.jsonl") == _rows(straight, "samples.jsonl")
