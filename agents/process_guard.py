"""Helper processes that die with their owner, even when the owner is killed outright (SIGKILL, the OOM
killer, a scheduler's hard stop).

vLLM runs its engine in processes of its own (``EngineCore``, and its ``Worker``), stopped by the
client's shutdown. A client killed without running it leaves them behind, reparented to init, holding
the model and the KV cache (3-4 GB for SmolLM2 on the CPU) until someone kills them by hand. vLLM's
worker watches its engine core, but nothing watches the client.

`OwnerGuard` starts this file as a small process in a session of its own (a terminal's Ctrl-C does not
reach it) that blocks reading a pipe from the owner. Its end closes when the owner exits, however it
exits, and the guard then SIGKILLs the processes it was given, each only if it is still the same
process (its start time matches; a pid can be reused). `release` closes the pipe on a normal close,
after the owner stopped them itself. Linux only (it reads ``/proc``); elsewhere it guards nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def descendants(pid: int) -> set[int]:
    """Every living process under `pid` (children, theirs, ...), from ``/proc``; empty where there is none."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class OwnerGuard:
    """Kills `pids` when this process exits without calling `release` (module docstring)."""

    def __init__(self, pids: set[int]):
        marks = [f"{pid}:{start}" for pid in sorted(pids) if (start := start_time(pid)) is not None]
        self.proc: subprocess.Popen[bytes] | None = None
        if marks:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, *marks],  # the standard library alone
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={"PATH": os.environ.get("PATH", "")},
            )

    def release(self) -> None:
        """The owner stopped the processes itself: the guard exits (it kills whatever is still left)."""
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None


def _guard(marks: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while sys.stdin.buffer.read(65536):  # returns b"" once every copy of the owner's end is closed
        pass
    for mark in marks:
        pid, start = mark.split(":")
        if start_time(int(pid)) == start:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    _guard(sys.argv[1:])
