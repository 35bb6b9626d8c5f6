"""Forking slots of `ProcessSandbox` (docs/sandboxes.md, "Forking slots"): each slot keeps one zygote, a
bubblewrap sandbox holding an interpreter with the harness's imports done (`pyzygote`), and a ``python -c``
program is forked from it into fresh namespaces instead of paying a bubblewrap start and an interpreter.

The host's side: `Zygote` starts and talks to one slot's zygote; `Zygote.fork` hands it one run (its
descriptors, limits and environment), moves the run into its cgroup before anything of it runs, and returns a
`Forked` run that `Pump` drives as it drives a `subprocess.Popen`.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from argym.envs.sandbox import cgroup
from argym.envs.sandbox.base import Limits, SandboxError
from argym.envs.sandbox.confine import rlimits

SOURCE = (Path(__file__).with_name("pyzygote.py")).read_text(encoding="utf-8")
OUTSIDE_THE_RUN = 3
"""Processes of the slot's uid that are not the run's: bubblewrap, the zygote (pid 1 of bubblewrap's PID
namespace) and the run's middle process; the run's RLIMIT_NPROC is its `processes` plus these (the kernel
counts every process of the uid)."""
_HANDOVER_S = 10.0
"""How long the zygote may take to fork a run and name it: past it the zygote is taken for broken."""
_CREDS = struct.calcsize("3i")
"""struct ucred: pid, uid, gid"""
_STOP_S = 2.0
"""How long a stopped zygote may take to end before it is killed."""
_END_S = 10.0
"""How long a killed run may take to end: past it the zygote is stopped, and the run with it."""


def _exited(pidfd: int, timeout_s: float) -> bool:
    """True once the process of `pidfd` has exited (at most `timeout_s` from now)."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def _kill(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Forked:
    """A run forked by a zygote, shaped as much like `subprocess.Popen` as `Pump` and `release` need: its
    pipes, ``pid`` (the middle process, as the host sees it), ``wait``/``poll``/``returncode``, `kill` and
    `close`."""

    def __init__(
        self, pid: int, pidfd: int, own: socket.socket, stdin: int, stdout: int, stderr: int, zygote: Zygote
    ):
        self.pid = pid
        self._pidfd: int | None = pidfd
        """the middle process's pidfd: a signal reaches it, never a later process given its pid"""
        self._own: socket.socket | None = own
        """the run's socket, on which the middle sends pid 1's pidfd"""
        self._first: int | None = None
        """pid 1 of the run's PID namespace (its pidfd), once `_first_pidfd` has it"""
        self._lock = threading.Lock()
        self.stdin = os.fdopen(stdin, "wb")
        self.stdout = os.fdopen(stdout, "rb")
        self.stderr = os.fdopen(stderr, "rb")
        self.returncode: int | None = None
        self._done = threading.Event()
        self.zygote = zygote
        threading.Thread(target=self._status, daemon=True).start()

    def _status(self) -> None:
        """The zygote's report of how the run ended (or, if the zygote died, a kill)."""
        status = self.zygote.status()
        with self._lock:
            self.returncode = -signal.SIGKILL if status is None else os.waitstatus_to_exitcode(status)
            os.close(self._pidfd)  # type: ignore[arg-type]
            self._pidfd = None
        self._done.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("zygote run", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def poll(self) -> int | None:
        return self.returncode

    def _first_pidfd(self) -> tuple[int | None, bool]:
        """pid 1's pidfd, received once (the middle sends it as soon as pid 1 exists, before the program
        runs); (None, True) where no pid 1 ever ran the program (the middle failed, or was killed, first);
        (None, False) where the middle did not answer in time."""
        if self._own is not None:
            own, self._own = self._own, None
            try:
                own.settimeout(_HANDOVER_S)
                # room for the credentials too (SO_PASSCRED is on), or the descriptor would be cut off
                _, anc, _, _ = own.recvmsg(16, socket.CMSG_SPACE(4) + socket.CMSG_SPACE(_CREDS))
                fds = [
                    int.from_bytes(data[i : i + 4], sys.byteorder, signed=True)
                    for level, kind, data in anc
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
                    for i in range(0, len(data) - len(data) % 4, 4)
                ]
                for extra in fds[1:]:
                    os.close(extra)
                self._first = fds[0] if fds else None
                answered = True
            except OSError:
                answered = False
            finally:
                own.close()
            if not answered:
                return None, False
        return self._first, True

    def kill(self, group: cgroup.TreeGroup | None, sweep: Callable[[], None] | None = None) -> None:
        """End the whole run, whatever it did to its death signals: pid 1 of its PID namespace (the kernel
        ends everything else in the namespace with it) and the middle, through their pidfds, and the run's
        cgroup. A run that was still running when killed is then swept (`sweep`: every process of the
        slot's uid but the zygote's). A run that does not end in time takes the zygote with it: it is pid 1
        of bubblewrap's namespace, so everything of the slot ends."""
        with self._lock:
            first, answered = self._first_pidfd()
            forced = not answered or (first is not None and not _exited(first, 0))
            for fd in (first, self._pidfd):
                if fd is not None:
                    _kill(fd)
        if group is not None:
            group.kill()
        ended = answered and (first is None or _exited(first, _END_S))
        try:
            self.wait(timeout=_END_S)
        except subprocess.TimeoutExpired:
            ended = False
        if not ended:
            self.zygote.stop()  # it does not answer: the slot starts a new one
        if forced and sweep is not None:
            sweep()

    def close(self) -> None:
        """Release what the host holds of the run (after its end)."""
        with self._lock:
            if self._own is not None:
                self._own.close()
                self._own = None
            if self._first is not None:
                os.close(self._first)
                self._first = None


class Zygote:
    """One slot's zygote: `argv` (bubblewrap and its options, up to the command) starts it as `uid`."""

    def __init__(self, bwrap_argv: list[str], python: str, uid: int | None, env: dict[str, str]):
        host, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._ctl = host
        self._own_pids: set[int] | None = None
        env = {**env, "ARGYM_ZYGOTE_FD": str(inside.fileno())}
        argv = list(bwrap_argv)
        for k, v in env.items():
            argv += ["--setenv", k, v]
        argv += ["--", python, "-I", "-S", "-c", SOURCE]

        def as_uid() -> None:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)

        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},
                preexec_fn=as_uid,
                start_new_session=True,
                pass_fds=(inside.fileno(),),
            )
        except (OSError, subprocess.SubprocessError) as e:
            host.close()
            raise SandboxError(f"could not start the slot's zygote ({e})") from e
        finally:
            inside.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(
        self,
        source: str,
        args: list[str],
        env: dict[str, str],
        limits: Limits,
        nproc: int | None,
        group: cgroup.TreeGroup | None,
        result_channel: bool,
    ) -> tuple[Forked, int | None]:
        """Start `source` as a run in fresh namespaces; the run waits for its stdin. Returns it and the read
        end of its result channel (descriptor 3 inside) if asked for."""
        spec = {
            "source": source,
            "args": args,
            "env": env,
            "rlimits": rlimits(limits, nproc),
            "disk_bytes": limits.disk_mb << 20,
        }
        own, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        own.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        own.settimeout(_HANDOVER_S)
        pipes = [os.pipe() for _ in range(4 if result_channel else 3)]
        ours = [pipes[0][1], *(r for r, _ in pipes[1:])]  # stdin's write end; the read ends of the rest
        given = [pipes[0][0], *(w for _, w in pipes[1:])]
        pidfd = None
        try:
            try:
                socket.send_fds(self._ctl, [json.dumps(spec).encode()], [theirs.fileno(), *given])
            finally:
                theirs.close()
                for fd in given:
                    os.close(fd)
            _, anc, _, _ = own.recvmsg(16, socket.CMSG_SPACE(_CREDS))
            pid = next(
                struct.unpack("3i", data[:_CREDS])[0]
                for level, kind, data in anc
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
            )
            pidfd = os.pidfd_open(pid)  # while it waits for "go": alive, so the pid is still its
            if group is not None:
                for path in group.procs_files:
                    Path(path).write_text(str(pid))
            own.send(b"go")
        except (OSError, StopIteration) as e:
            own.close()
            for fd in [*ours, *([pidfd] if pidfd is not None else [])]:
                os.close(fd)
            self.stop()
            raise SandboxError(f"the slot's zygote did not start the run ({e!r})") from e
        run = Forked(pid, pidfd, own, ours[0], ours[1], ours[2], self)
        return run, ours[3] if result_channel else None

    def status(self) -> int | None:
        """The wait status of the run in flight, once it ended; None if the zygote is gone."""
        try:
            data = self._ctl.recv(1 << 12)
            return int(json.loads(data)["status"]) if data else None
        except (OSError, ValueError, KeyError):
            return None

    def pids(self) -> set[int]:
        """bubblewrap's process and every process below it (the zygote; a run in flight)."""
        children = _children()
        tree, todo = set(), [self.proc.pid]
        while todo:
            pid = todo.pop()
            tree.add(pid)
            todo += children.get(pid, [])
        return tree

    def own_pids(self) -> set[int]:
        """bubblewrap's process and the zygote, nothing of a run: what a sweep of the slot's uid spares."""
        if self._own_pids is None:
            zygote = _children().get(self.proc.pid, [])
            if not zygote:
                return {self.proc.pid}  # not started yet, or gone: found again next time
            self._own_pids = {self.proc.pid, *zygote}
        return self._own_pids

    def stop(self) -> None:
        """Close the control socket: the zygote ends, and with it, pid 1 of bubblewrap's PID namespace,
        everything in the sandbox (a run in flight too); bubblewrap, which waits for it, reaps it and exits,
        and is reaped here, so no process of the slot is left for the host's init to reap. A zygote that
        does not end in time is killed, and then bubblewrap."""
        try:
            self._ctl.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._ctl.close()
        try:
            self.proc.wait(timeout=_STOP_S)
            return
        except subprocess.TimeoutExpired:
            pass
        for pid in _children().get(self.proc.pid, []):  # the zygote, still bubblewrap's unreaped child
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=_STOP_S)
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _children() -> dict[int, list[int]]:
    """Parent pid → its children's pids, of every process on the host."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                children.setdefault(int(f.read().rsplit(b")", 1)[1].split()[1]), []).append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return children
