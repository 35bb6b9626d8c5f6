"""Memory and process limits for a run's whole process tree, from a control group per slot.

`RLIMIT_AS` bounds one process: a run allowed `processes` children could use
``memory_mb × processes`` in all. A cgroup bounds the tree: every process the
run starts (bubblewrap, the program, its children, daemons) is born into the
slot's group, whose memory (anonymous memory, page cache and the tmpfs files it
writes) and process count are capped; past the cap the kernel's OOM killer
kills inside the group only.

Both cgroup versions: v2 (``memory.max``, ``pids.max``, ``memory.events``), and
v1's memory and pids hierarchies (``memory.limit_in_bytes``,
``memory.memsw.limit_in_bytes``, ``memory.oom_control``), which hosts with the
hybrid layout still use. Groups are created under the cgroup the current
process is in, or under ``$ARGYM_CGROUP_ROOT`` (a delegated, writable group);
creating them needs root or a delegation. `tree_groups` says why not where it
cannot, and the sandbox falls back to per-process limits (docs/sandboxes.md).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV = "ARGYM_CGROUP_ROOT"


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, fstype, super options) of each cgroup mount."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rest = left.split(), right.split()
            if rest and rest[0] in ("cgroup", "cgroup2"):
                out.append(
                    (fields[4], fields[3], rest[0], set(rest[2].split(",")) if len(rest) > 2 else set())
                )
    return out


def _own_groups() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    return out


def _under(mount: str, root: str, path: str) -> Path:
    rel = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(mount) / rel.lstrip("/")


@dataclass(frozen=True)
class Layout:
    """Where slot groups are made: a v2 parent, or v1 memory (and pids) parents."""

    version: int
    memory: Path
    pids: Path | None = None


def find_layout() -> tuple[Layout | None, str]:
    """The layout to use here, or None and why not (for the fallback's warning)."""
    if not os.path.exists("/proc/self/cgroup"):
        return None, "this system has no cgroups"
    mounts, own = _mounts(), _own_groups()
    override = os.environ.get(ROOT_ENV)
    for point, root, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        parent = Path(override) if override else _under(point, root, own.get("", "/"))
        try:
            available = (parent / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "memory" not in available:
            continue
        wanted = [c for c in ("memory", "pids") if c in available]
        try:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            return Layout(2, parent), ""
        except OSError as e:  # v2 forbids controllers below a group that holds processes (ours does)
            sibling_parent = (
                parent.parent
            )  # its children (our group's siblings) already get the memory controller
            try:
                usable = (
                    not override
                    and parent != Path(point)
                    and os.access(sibling_parent, os.W_OK)
                    and "memory" in (sibling_parent / "cgroup.subtree_control").read_text().split()
                )
            except OSError:
                usable = False
            if usable:
                return Layout(2, sibling_parent), ""
            return None, (
                f"cgroup v2 at {parent} cannot delegate the memory controller to child groups ({e}); "
                f"set {ROOT_ENV} to a writable group whose processes live elsewhere"
            )
    memory = next(((p, r) for p, r, t, opts in mounts if t == "cgroup" and "memory" in opts), None)
    if memory is None:
        return None, "no cgroup hierarchy with the memory controller is mounted"
    mem_parent = Path(override) if override else _under(*memory, own.get("memory", "/"))
    pids = next(((p, r) for p, r, t, opts in mounts if t == "cgroup" and "pids" in opts), None)
    pids_parent = _under(*pids, own.get("pids", "/")) if pids else None
    if not os.access(mem_parent, os.W_OK):
        return None, f"the memory cgroup {mem_parent} is not writable (needs root or a delegated group)"
    return Layout(1, mem_parent, pids_parent if pids_parent and os.access(pids_parent, os.W_OK) else None), ""


class TreeGroup:
    """One slot's group(s): `limit` before a run, `procs_files` for the child to join, then `oom_kills`."""

    def __init__(self, layout: Layout, name: str):
        self.layout = layout
        self.dirs = [layout.memory / name] + ([layout.pids / name] if layout.pids else [])
        for d in self.dirs:
            d.mkdir(exist_ok=True)

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def limit(self, memory_bytes: int, pids: int) -> None:
        mem = self.dirs[0]
        if self.layout.version == 2:
            (mem / "memory.max").write_text(str(memory_bytes))
            if (mem / "memory.swap.max").exists():
                (mem / "memory.swap.max").write_text("0")
            if (mem / "pids.max").exists():
                (mem / "pids.max").write_text(str(pids))
            return
        memsw = mem / "memory.memsw.limit_in_bytes"
        current = int(memsw.read_text()) if memsw.exists() else None
        # memsw must stay >= the memory limit: raise whichever order keeps that true
        order = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
        if current is not None and current < memory_bytes:
            order.reverse()
        for name in order:
            if (mem / name).exists():
                (mem / name).write_text(str(memory_bytes))
        if len(self.dirs) > 1:
            (self.dirs[1] / "pids.max").write_text(str(pids))

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer has killed in the group so far."""
        name = "memory.events" if self.layout.version == 2 else "memory.oom_control"
        try:
            for line in (self.dirs[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self, wait_s: float = 3.0) -> None:
        """SIGKILL every process in the group until none is left."""
        end = time.monotonic() + wait_s
        while True:
            try:
                pids = [int(p) for p in (self.dirs[0] / "cgroup.procs").read_text().split()]
            except OSError:
                return
            live = [p for p in pids if not _zombie(p)]
            for pid in live:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not live or time.monotonic() > end:
                return
            time.sleep(0.005)

    def remove(self) -> None:
        self.kill()
        for d in self.dirs:
            for _ in range(50):  # rmdir fails while the last killed processes are being reaped
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def join(procs_files: list[str]) -> None:
    """Move the calling process into the groups (in a child between fork and exec)."""
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
