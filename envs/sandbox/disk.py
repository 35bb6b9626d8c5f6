"""Host directories with a hard size bound, and the reaping of those a dead process left behind.

A writable directory bound into the process sandbox (an SWE workspace) is on
the host's disk: checking its size after a command lets one command write
gigabytes first. As root, a `BoundedDir` is a tmpfs of ``size_mb`` mounted on a
fresh directory, so a write past the bound fails (ENOSPC) while it happens.
Elsewhere it is a plain directory and a one-time warning says the bound is
only checked after each command.

Folders are named ``<prefix><owner pid>-…``: each is removed (and unmounted)
at close or interpreter exit, and a later start removes those whose owner is
dead (`reap`), since a killed process runs no exit handler.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import weakref
from pathlib import Path

log = logging.getLogger(__name__)
_WARNED: set[str] = set()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def orphans(parent: Path, prefix: str) -> list[Path]:
    """Entries of `parent` named ``<prefix><pid>-…`` whose owner pid is no longer alive."""
    owned = re.compile(re.escape(prefix) + r"(\d+)-")
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    return [e for e in entries if (m := owned.match(e.name)) and not alive(int(m.group(1)))]


def release(path: Path) -> None:
    """Unmount (if mounted) and remove `path`."""
    if os.path.ismount(path):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
    shutil.rmtree(path, ignore_errors=True)


def reap(parent: Path, prefix: str) -> None:
    for orphan in orphans(parent, prefix):
        release(orphan)


def _mount_tmpfs(path: Path, size_mb: int) -> str | None:
    """Mount a `size_mb` tmpfs on `path`; None if done, else why not."""
    if os.geteuid() != 0:
        return "mounting a size-limited filesystem needs root"
    try:
        r = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={size_mb}m,mode=0711,nosuid,nodev",
                "argym-workspace",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"mount failed: {e}"
    return None if r.returncode == 0 else f"mount failed: {r.stderr.strip()[:200]}"


class BoundedDir:
    """A fresh directory under `parent` holding at most `size_mb` (see the module docstring).

    `bounded` says whether the bound holds during writes (a tmpfs) or not.
    The tmpfs lives in memory: its pages count as the writer's memory.
    """

    def __init__(self, parent: Path, prefix: str, size_mb: int):
        reap(parent, prefix)
        self.path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
        self._finalizer = weakref.finalize(self, release, self.path)
        why = _mount_tmpfs(self.path, size_mb)
        os.chmod(self.path, 0o711)
        self.bounded = why is None
        if why is not None and why not in _WARNED:
            _WARNED.add(why)
            log.warning(
                "Workspaces are not on a size-limited filesystem (%s): their disk limit is checked only "
                "after each command, so one command can write past it. See docs/sandboxes.md.",
                why,
            )

    def close(self) -> None:
        self._finalizer()
