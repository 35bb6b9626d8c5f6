"""Checkpoints that survive a kill: written under a temporary name, then renamed.

A checkpoint directory holds the policy as an ordinary Hugging Face checkpoint
(`policy/`) and `trainer_state.pt` (step, optimizer, every RNG the run draws
from, the task sampler's position). Loading falls back to the previous
checkpoint if a crash struck between the two renames. A run dir resumes only with
its own config (`check_run_config`).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from argym.algorithms.config import TrainConfig, merge_sections, read_yaml
from argym.errors import ConfigError

NAME = "checkpoint"


def rng_state(task_rng: np.random.Generator) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "task_rng": task_rng.bit_generator.state,
    }


def set_rng_state(state: dict[str, Any], task_rng: np.random.Generator) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    task_rng.bit_generator.state = state["task_rng"]


def save_checkpoint(
    run_dir: Path, policy: Any, state: dict[str, Any], weights: dict[str, torch.Tensor] | None = None
) -> Path:
    """Atomically replace `run_dir/checkpoint` with the policy and `state`; `weights`: the policy's
    weights gathered from a sharded model (algorithms/fsdp.py), written in the same format.

    Half-written checkpoints of a process killed while saving (`checkpoint.tmp-PID`) are removed first:
    the run dir has one writer, so any other is left over."""

    def write(tmp: Path) -> None:
        policy.save(tmp / "policy", weights)
        torch.save(state, tmp / "trainer_state.pt")

    return _replace_atomically(run_dir, NAME, write)


def _replace_atomically(run_dir: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Replace `run_dir/name` with what `write` puts in a fresh directory: written whole under a temporary
    name, then renamed, so a reader finds the old copy (`name.old`) or the new one, never half of one.
    Leftover temporary directories of a process killed while writing are removed first (one writer per run)."""
    final, tmp, old = run_dir / name, run_dir / f"{name}.tmp-{os.getpid()}", run_dir / f"{name}.old"
    for stale in run_dir.glob(f"{name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir(parents=True)
    write(tmp)
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def find_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint directory in `run_dir`, if any."""
    for name in (NAME, f"{NAME}.old"):
        d = run_dir / name
        if (d / "trainer_state.pt").is_file() and (d / "policy" / "config.json").is_file():
            return d
    return None


def load_state(ckpt: Path, name: str = "trainer_state.pt") -> dict[str, Any]:
    state: dict[str, Any] = torch.load(ckpt / name, weights_only=False)
    return state


WARM_START = "warm_start"
WARM_STATE = "warm_start_state.pt"


def save_warm_start(run_dir: Path, policy: Any, state: dict[str, Any]) -> Path:
    """Atomically replace `run_dir/warm_start` with the policy and the warm start's `state` (sft.warm_start):
    a warm start stopped part-way resumes from it (no RL checkpoint exists yet)."""

    def write(tmp: Path) -> None:
        policy.save(tmp / "policy")
        torch.save(state, tmp / WARM_STATE)

    return _replace_atomically(run_dir, WARM_START, write)


def find_warm_start(run_dir: Path) -> Path | None:
    """The warm start's own checkpoint, if one is complete."""
    for name in (WARM_START, f"{WARM_START}.old"):
        d = run_dir / name
        if (d / WARM_STATE).is_file() and (d / "policy" / "config.json").is_file():
            return d
    return None


def remove_warm_start(run_dir: Path) -> None:
    for name in (WARM_START, f"{WARM_START}.old"):
        shutil.rmtree(run_dir / name, ignore_errors=True)


BEST = "best"


def read_best(run_dir: Path) -> dict[str, Any] | None:
    """The best checkpoint's step and held-out success (`best/best.json`), if one was kept."""
    path = run_dir / BEST / "best.json"
    if not path.is_file():
        return None
    best: dict[str, Any] = json.loads(path.read_text())
    return best


def keep_best(run_dir: Path, policy: Any, step: int, success: float) -> bool:
    """Keep the policy in `run_dir/best/` (with best.json: step, success) when its held-out success beats the
    kept one's (a tie keeps the earlier): a run's last checkpoint is not always its best (the quickstart's
    best came at step 75 of 100). `tiny:RUN_DIR/best` or `hf:RUN_DIR/best` evaluates it."""
    kept = read_best(run_dir)
    if kept is not None and success <= kept["success"]:
        return False
    final, tmp = run_dir / BEST, run_dir / f"{BEST}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    policy.save(tmp / "policy")
    (tmp / "best.json").write_text(json.dumps({"step": step, "success": success}))
    old = run_dir / f"{BEST}.old"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)  # a kill between the renames leaves best.old, never a half-written best
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return True


# Keys a resumed run may change: they extend or observe the run without altering its trajectory.
RESUMABLE_CHANGES = ("steps", "eval", "checkpoint_every", "cluster", "log", "callbacks")


def check_run_config(cfg: TrainConfig, run_dir: Path, resumable: bool) -> None:
    """A run dir belongs to one config: resuming (`resumable`: it holds a checkpoint) with another would
    mix two runs, so a config that differs outside `RESUMABLE_CHANGES` is refused."""
    path = run_dir / "config.yaml"
    if not (resumable and path.exists()):
        return
    mine = cfg.to_dict()
    theirs = TrainConfig().to_dict()  # keys a run from an older argym lacks take their defaults
    merge_sections(theirs, read_yaml(path) or {})
    changed = sorted(k for k in mine if k not in RESUMABLE_CHANGES and mine.get(k) != theirs.get(k))
    if changed:
        raise ConfigError(
            f"{run_dir} holds a run with another config (differs in: {', '.join(changed)}); "
            "pass another run directory (e.g. out_dir=runs/NAME), or delete this one to start over."
        )
