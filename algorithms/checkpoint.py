"""Checkpoints that survive a kill: written under a temporary name, then renamed.

A checkpoint directory holds the policy as an ordinary Hugging Face checkpoint
(`policy/`) and `trainer_state.pt` (step, optimizer, every RNG the run draws
from, the task sampler's position). Loading falls back to the previous
checkpoint if a crash struck between the two renames.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

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
    final = run_dir / NAME
    tmp = run_dir / f"{NAME}.tmp-{os.getpid()}"
    old = run_dir / f"{NAME}.old"
    for stale in run_dir.glob(f"{NAME}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp.mkdir(parents=True)
    policy.save(tmp / "policy", weights)
    torch.save(state, tmp / "trainer_state.pt")
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


def load_state(ckpt: Path) -> dict[str, Any]:
    state: dict[str, Any] = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    return state
