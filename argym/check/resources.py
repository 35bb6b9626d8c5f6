"""Resources: after `close()`, and after the process running the env is killed, nothing is left.

The env runs in child processes (`argym.check.child`) whose temp dir is a
private one, so every temp dir it makes is counted whatever its name:

1. ``close``: an episode, then ``close()``; the child lists its descendant
   processes and listening sockets while it still lives (a socket still
   listening is a leak); after it exits normally, none of those processes may
   live on (a pool shared by the whole process may outlive `close()`, not the
   process), its temp dir must be empty and no Docker container of its
   (labelled ``argym.sandbox``, owner = its pid) may remain;
2. ``kill``: after an episode the child plays on, and a SIGKILL lands mid-step;
   every process the child had started (and any carrying its mark in the
   environment) must die with it.
   Then a new child plays one step and closes the env in the same temp dir
   (the next start may reap what a killed one left); after that, the temp dir must be
   empty and the killed child's containers gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from argym.check.base import FAIL, NOT_APPLICABLE, PASS, Outcome, Subject
from argym.check.child import alive, descendants, describe, marked, read_result, run_child

NAME = "resources"
GRACE_S = 1.0
"""How long processes get to exit after their parent was killed (a die-with-parent signal, a reaper)."""
KILL_AFTER_S = 0.5
"""How long the child plays on after its first episode before the SIGKILL (so it lands mid-step)."""


def check(subject: Subject) -> Outcome:
    if subject.config.quick:
        return Outcome(NAME, NOT_APPLICABLE, "skipped by --quick (runs the env in child processes)")
    if not Path("/proc/self/stat").exists():
        return Outcome(NAME, NOT_APPLICABLE, "needs /proc (Linux) to see processes and sockets")
    root = Path(tempfile.mkdtemp(prefix="argym-check-tmp-"))
    root.chmod(0o755)  # sandboxed processes run as other uids and must reach their dirs
    leaks: list[str] = []
    try:
        leaks += [f"after close(): {x}" for x in _after_close(subject, root)]
        _empty(root)
        leaks += [f"after SIGKILL: {x}" for x in _after_kill(subject, root)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if leaks:
        return Outcome(NAME, FAIL, "; ".join(leaks)[:2000])
    return Outcome(
        NAME,
        PASS,
        "nothing left after close() nor after SIGKILL and restart "
        "(processes, listening ports, temp dirs, argym containers)",
    )


def _after_close(subject: Subject, root: Path) -> list[str]:
    proc, out = run_child(subject.config, "close", tmp_root=str(root), wait=False)
    limit = 2 * subject.config.reset_timeout_s + 4 * subject.config.step_timeout_s + 60
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        read_result(out, None)
        return [f"the child did not finish within {limit:g} s"]
    result = read_result(out, proc.returncode)
    if result.get("error"):
        return [f"the child failed: {result['error']}"]
    time.sleep(GRACE_S)
    # a process-wide pool the env shares (alive after close(), gone when the process exits) is no leak
    left = [(pid, text) for pid, text in zip(result["pids"], result["processes"]) if alive(pid)]
    leaks = [f"process left: {text}" for _, text in left]
    _kill([pid for pid, _ in left])  # the check cleans up what it found
    leaks += [f"port left open: {p}" for p in result["ports"]]
    leaks += [f"hang: {h}" for h in result.get("hangs", [])]
    leaks += [f"temp dir left: {p}" for p in _left_in(root)]
    leaks += [f"container left: {c}" for c in containers(proc.pid)]
    return leaks


def _after_kill(subject: Subject, root: Path) -> list[str]:
    mark = uuid.uuid4().hex
    proc, out = run_child(subject.config, "kill", tmp_root=str(root), mark=mark, wait=False)
    deadline = time.monotonic() + 2 * subject.config.reset_timeout_s + 4 * subject.config.step_timeout_s + 60
    while time.monotonic() < deadline and proc.poll() is None and not Path(out).stat().st_size:
        time.sleep(0.1)
    if proc.poll() is not None:
        return [f"the child failed before it was killed: {read_result(out, proc.returncode).get('error')}"]
    time.sleep(KILL_AFTER_S)
    started = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    read_result(out, None)
    time.sleep(GRACE_S)
    survivors = sorted({p for p in started if alive(p)} | set(marked(mark)))
    leaks = [f"process survived its parent: {describe(p)}" for p in survivors]
    _kill(survivors)
    restarted = run_child(subject.config, "restart", tmp_root=str(root))
    if restarted.get("error"):
        leaks.append(f"the next start failed: {restarted['error']}")
    else:
        leaks += [f"process left by the next start's close(): {p}" for p in restarted["processes"]]
        _kill([p for p in restarted["pids"] if alive(p)])
    leaks += [f"temp dir left (not reaped by the next start): {p}" for p in _left_in(root)]
    leaks += [f"container left: {c}" for c in containers(proc.pid)]
    return leaks


def _kill(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _left_in(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def _empty(root: Path) -> None:
    for p in root.iterdir():
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink()


def containers(pid: int) -> list[str]:
    """Docker containers that argym's sandboxes in process `pid` made (label ``argym.sandbox.owner``), removed."""
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return []
    try:
        import docker

        from argym.envs.sandbox.engine import LABEL

        client = docker.from_env()
        found = [
            c
            for c in client.containers.list(all=True, filters={"label": LABEL})
            if str(c.labels.get(f"{LABEL}.owner", "")).startswith(f"{pid}-")
        ]
    except Exception:
        return []
    names = []
    for c in found:
        names.append(f"{c.name} ({c.status})")
        try:
            c.remove(force=True)
        except Exception:
            pass
    return names
