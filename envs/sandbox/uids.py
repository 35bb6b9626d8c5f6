"""Machine-wide uids for sandbox slots: leased with an flock each, swept of processes, handed trees.

As root, each concurrent slot of a `ProcessSandbox` runs as its own unprivileged
uid, so RLIMIT_NPROC is enforced (it is not for root), slots cannot see or
signal each other, and a run's leftovers are every live process of that uid.
"""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
import time
from collections.abc import Collection

from argym.envs.sandbox.base import SandboxUnavailable

BASE_UID = 20_000
UID_POOL = 40_000
"""Slots lease uids from [BASE_UID, BASE_UID + UID_POOL)."""
LEASE_DIR = os.path.join(tempfile.gettempdir(), "argym-sandbox-uids")


def kill_uid(uid: int, wait_s: float = 3.0, spare: Collection[int] = ()) -> int:
    """SIGKILL every live process owned by `uid` (but those in `spare`) until none is left; returns the most
    seen.

    Zombies are dead already; they wait for their parent (or the host's init) to reap them.
    """
    n, end = 0, time.monotonic() + wait_s
    while True:
        found = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in spare:
                continue
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                with open(f"/proc/{name}/stat", "rb") as f:
                    if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                        continue
                found += 1
                os.kill(int(name), signal.SIGKILL)
            except (OSError, IndexError):
                pass
        n = max(n, found)
        if not found or time.monotonic() > end:
            return n
        time.sleep(0.005)


def lease_uids(count: int) -> list[tuple[int, int]]:
    """`count` uids nobody else holds, each as (uid, fd of its held lock file).

    A lock is an flock on ``LEASE_DIR/<uid>``: the kernel drops it when the fd
    closes or the holder dies, so a crashed run never leaks a uid. A freshly
    leased uid is swept first, in case a dead holder left processes behind.
    """
    os.makedirs(LEASE_DIR, mode=0o700, exist_ok=True)
    out: list[tuple[int, int]] = []
    for uid in range(BASE_UID, BASE_UID + UID_POOL):
        fd = os.open(os.path.join(LEASE_DIR, str(uid)), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        kill_uid(uid)
        out.append((uid, fd))
        if len(out) == count:
            return out
    for _, fd in out:
        os.close(fd)
    raise SandboxUnavailable(
        f"no free sandbox uid left in [{BASE_UID}, {BASE_UID + UID_POOL}); "
        f"close other sandboxes or remove stale locks in {LEASE_DIR}."
    )


def chown_tree(root: str, uid: int) -> None:
    """Give `root` and everything under it to `uid` (symlinks themselves, never their targets)."""
    os.lchown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            try:
                os.lchown(os.path.join(dirpath, name), uid, uid)
            except FileNotFoundError:
                pass
