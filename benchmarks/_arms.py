"""The arm runner shared by the learning benchmarks (`agentic_learning.py`, `support_compliance.py`).

A benchmark of this kind trains one warm start, then runs each arm in a child process of its own (the
whole machine and a clean heap per arm), and appends one row per arm to ``--out``/rows.jsonl as it ends,
keyed by the settings that make rows comparable. A rerun with the same key keeps the rows it finds
(resumable after a kill or across sessions); ``--arms`` reruns or picks some.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def add_arm_arguments(ap: argparse.ArgumentParser, out: str, example: str) -> None:
    """The arguments every such benchmark takes: `--arms` (`example`: a few of its arm names), `--small`,
    `--out` (default `out`), the hidden `--child`, and recipe overrides."""
    ap.add_argument("--arms", default="", help=f"only these arms (e.g. {example}); the rest from --out")
    ap.add_argument(
        "--small", action="store_true", help="tiny model and sizes: a CPU smoke run of the script"
    )
    ap.add_argument("--out", default=out)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument(
        "overrides", nargs="*", help="recipe overrides (key=value) for every arm, after --small's"
    )


def load(a: argparse.Namespace, extra: list[str] | tuple[str, ...] = ()) -> Any:
    """The recipe with the run's overrides, then `extra`."""
    from argym.algorithms.config import load_config

    return load_config(a.recipe, [*a.overrides, *extra])


def from_warm(policy_dir: Path) -> list[str]:
    """The overrides that start a run from the warm start's checkpoint."""
    return ["policy.kind=hf", f"policy.path={policy_dir}", "warm_start.steps=0"]


def append_row(out: Path, arm: str, key: str, row: dict[str, Any]) -> None:
    with open(out / "rows.jsonl", "a") as f:  # one line per arm, as it ends
        f.write(json.dumps({"arm": arm, "key": key, **row}) + "\n")


class StepLog:
    """An arm's per-step rows in its run directory (``steps.jsonl``), so that an arm killed part-way resumes
    from its trainer's last checkpoint with the rows of the steps that checkpoint holds (`resumed`)."""

    def __init__(self, run_dir: Path):
        self.path = run_dir / "steps.jsonl"

    def resumed(self, step: int) -> list[dict[str, Any]]:
        """The rows of steps 1..`step` (the checkpoint's); later ones are dropped, to be run again."""
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        kept = [r for r in map(json.loads, lines) if r["step"] <= step]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        return kept

    def append(self, row: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def run_arms(
    script: str,
    a: argparse.Namespace,
    arms: list[str],
    key: str,
    argv: list[str],
    resumable: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run each of `arms` not yet in rows.jsonl under `key` (or named by `--arms`) as ``script --child ARM
    *argv -- *overrides``. An arm killed part-way runs again whole, or with `resumable` (an arm that
    checkpoints and keeps a `StepLog`) goes on from its run directory when that was made under the same `key`.
    Returns the rows under `key` of `arms`, the last row of an arm winning (a rerun)."""
    out = Path(a.out)
    path = out / "rows.jsonl"

    def rows() -> list[dict[str, Any]]:
        lines = path.read_text().splitlines() if path.exists() else []
        return [r for r in map(json.loads, lines) if r["key"] == key and r["arm"] in arms]

    done = {r["arm"] for r in rows()}
    named = set(a.arms.split(",")) if a.arms else set()
    for arm in arms:
        if arm in done and arm not in named:
            print(f"{arm}: kept from {path}", flush=True)
            continue
        if named and arm not in named:
            continue
        stamp = out / arm / "key.txt"
        if not (resumable and arm not in named and stamp.exists() and stamp.read_text() == key):
            shutil.rmtree(out / arm, ignore_errors=True)
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(key)
        else:
            print(f"{arm}: resuming from {out / arm}", flush=True)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, script, "--child", arm, *argv, "--", *a.overrides])
        if proc.returncode:
            sys.exit(f"the {arm} arm failed (exit {proc.returncode}); its output is above.")
        print(f"{arm}: {time.perf_counter() - t:.0f} s", flush=True)
    return {r["arm"]: r for r in rows()}
