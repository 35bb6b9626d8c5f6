"""One started run of the process sandbox, the pump that moves its bytes until it ends, and its end: the
whole tree killed (`kill_tree`) and what it held released (`release`)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argym.envs.sandbox import cgroup
from argym.envs.sandbox.base import Limits
from argym.envs.sandbox.uids import kill_uid

_GRACE_S = 2.0
"""After the kill, how long the pump waits for the run's pipes to reach their end before it stops using them."""


@dataclass
class Started:
    """A run whose process is up and waiting for its stdin, with what must be released after it."""

    proc: subprocess.Popen
    uid: int | None
    group: cgroup.TreeGroup | None
    workdir: Path | None
    result_r: int | None
    """read end of the result channel (descriptor 3 inside), if requested"""
    status_r: int | None
    """read end of bwrap's ``--json-status-fd``"""
    limits: Limits


class Pump:
    """Moves a run's bytes: feeds stdin, reads stdout, stderr and the two channels concurrently, each
    capped (an overflow kills the run), and waits for the exit within the timeout."""

    def __init__(self, run: Started, kill: Callable[[], None]):
        self.run, self.kill = run, kill
        self.out, self.err, self.res, self.status = bytearray(), bytearray(), bytearray(), bytearray()
        self.overflow = False

    def wait(self, stdin: bytes | None, timeout_s: float) -> bool:
        """Run to the end or to `timeout_s`, then kill the whole tree; True if the timeout came first.

        Every thread reads or writes through ``poll`` on its pipe and on a stop pipe: once the tree is
        killed, the pipes reach their end at once, and if something the kill missed still holds one, the
        threads stop anyway (``_GRACE_S`` later), so that nothing it holds can block the host, and the
        pipes are closed only once no thread uses them."""
        run, cap = self.run, self.run.limits.output_bytes
        stop_r, stop_w = os.pipe()
        jobs: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
            (self._drain, (run.proc.stdout.fileno(), self.out, cap, stop_r)),  # type: ignore[union-attr]
            (self._drain, (run.proc.stderr.fileno(), self.err, cap, stop_r)),  # type: ignore[union-attr]
            (self._feed, (stdin, stop_r)),
        ]
        if run.result_r is not None:
            jobs.append((self._drain, (run.result_r, self.res, 1 << 20, stop_r)))
        if run.status_r is not None:
            jobs.append((self._drain, (run.status_r, self.status, 1 << 16, stop_r)))
        threads = [threading.Thread(target=f, args=a, daemon=True) for f, a in jobs]
        for t in threads:
            t.start()
        exited = threading.Event()  # a blocking waitpid in a thread: Popen.wait(timeout) polls with sleeps

        def wait() -> None:
            run.proc.wait()
            exited.set()

        threading.Thread(target=wait, daemon=True).start()
        timed_out = not exited.wait(timeout=timeout_s)
        self.kill()  # the whole tree, also after a normal exit (daemonised grandchildren)
        end = time.monotonic() + _GRACE_S
        for t in threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        os.write(stop_w, b"x")  # whatever still holds a pipe, the host stops reading and writing it
        for t in threads:
            t.join(timeout=_GRACE_S)
        os.close(stop_w)
        if not any(t.is_alive() for t in threads):  # else left open: a thread may still poll it
            os.close(stop_r)
        return timed_out

    def _drain(self, fd: int, buf: bytearray, cap: int, stop_r: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(stop_r, select.POLLIN)
        while True:
            if stop_r in dict(poller.poll()):
                return
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            room = cap - len(buf)
            buf += chunk[: max(room, 0)]
            if len(chunk) > room:
                self.overflow = True
                self.kill()
                return

    def _feed(self, stdin: bytes | None, stop_r: int) -> None:
        pipe = self.run.proc.stdin
        try:
            if stdin:
                fd = pipe.fileno()  # type: ignore[union-attr]
                os.set_blocking(fd, False)  # our end's own flag: the program's end stays blocking
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
                poller.register(stop_r, select.POLLIN)
                data = memoryview(stdin)
                while data:
                    events = dict(poller.poll())
                    if stop_r in events:
                        break
                    if events.get(fd, 0) & (select.POLLERR | select.POLLHUP):
                        break
                    try:
                        data = data[os.write(fd, data) :]
                    except BlockingIOError:
                        pass
            pipe.close()  # type: ignore[union-attr]
        except OSError:
            pass


def kill_tree(proc: subprocess.Popen, uid: int | None, group: cgroup.TreeGroup | None) -> None:
    """Kill the whole tree. As root, the slot's processes go first, so that bwrap reaps its
    namespace (a killed bwrap would leave its child a zombie for the host's init)."""
    if uid is not None and proc.poll() is None:
        kill_uid(uid, wait_s=1.0, spare=(proc.pid,))
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap dies; --die-with-parent takes its PID namespace
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    if uid is not None:
        kill_uid(uid)
    if group is not None:
        group.kill()


def release(run: Started) -> bool:
    """Close a finished run's descriptors, remove its folder and cgroup; True if its cgroup saw an OOM kill."""
    for fd in (run.result_r, run.status_r):
        if fd is not None:
            os.close(fd)
    for s in (run.proc.stdout, run.proc.stderr, run.proc.stdin):
        if s is None:
            continue
        try:
            s.close()
        except OSError:
            pass
    close = getattr(run.proc, "close", None)  # a forked run: what the host holds of it
    if close is not None:
        close()
    if run.workdir is not None:
        shutil.rmtree(run.workdir, ignore_errors=True)
    oom = run.group is not None and run.group.oom_kills() > 0  # a fresh group: every kill was this run's
    if run.group is not None:
        run.group.remove()
    return oom
