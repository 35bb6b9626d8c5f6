"""What the warm start shows while it runs: steps, loss and an estimate of the time left.

On a loaded machine the default warm start takes many minutes; without this it printed nothing until
it ended. In a terminal a rich progress bar; otherwise (a log file, CI) a plain line about every 5% of
the steps. Every step also goes to ``warm_start.jsonl`` in the run directory (step, loss, seconds).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import TracebackType
from typing import Any


def eta(seconds: float) -> str:
    """A duration for people: 42 s, 3 min 05 s, 1 h 02 min."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class WarmStartLog:
    """A context manager; call it with each finished step's index (0-based) and loss."""

    def __init__(self, console: Any, run_dir: Path | None, steps: int, start: int, n_sequences: int):
        self.console, self.steps, self.start = console, steps, start
        self.path = None if run_dir is None else run_dir / "warm_start.jsonl"
        if self.path is not None and self.path.exists():  # a resumed warm start logs its later steps again
            kept = [ln for ln in self.path.read_text().splitlines() if ln and json.loads(ln)["step"] <= start]
            self.path.write_text("".join(ln + "\n" for ln in kept))
        self.every = max(1, steps // 20)
        self.t0 = time.perf_counter()
        self.progress: Any = None
        what = f"Warm start: {steps} steps on {n_sequences} oracle trajectories"
        resumed = f", resuming at step {start + 1}" if start else ""
        console.print(f"{what}{resumed}.", markup=False, highlight=False, soft_wrap=True)

    def __enter__(self) -> WarmStartLog:
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(
                TextColumn("[bold]warm start"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.description}"),
                console=self.console,
            )
            self.progress.start()
            self.bar = self.progress.add_task("", total=self.steps, completed=self.start)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.progress is not None:
            self.progress.stop()

    def __call__(self, step: int, loss: float) -> None:
        done = step + 1
        elapsed = time.perf_counter() - self.t0
        left = elapsed / max(done - self.start, 1) * (self.steps - done)
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(
                    json.dumps({"step": done, "loss": round(loss, 6), "seconds": round(elapsed, 2)}) + "\n"
                )
        if self.progress is not None:
            self.progress.update(self.bar, completed=done, description=f"loss {loss:.3f}")
        elif done == self.start + 1 or done % self.every == 0 or done == self.steps:
            self.console.print(
                f"warm start {done}/{self.steps}  loss {loss:.3f}  {eta(elapsed)} elapsed, about {eta(left)} left",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
