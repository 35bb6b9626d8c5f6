"""How a forked run ends, with and without a cgroup (issue 43; docs/sandboxes.md, "Forking slots").

A red team found that without a writable cgroup (an unprivileged container, a host without delegation) a
forked run that clears its own death signal outlived its timeout: the host killed only the middle process.
Holding its stdout, it kept `run` blocked past its timeout and its slot taken; closing its descriptors
instead, it was reachable by the later runs on its slot over an abstract unix socket (one network
namespace per slot). These tests run those programs with ``cgroups=False``, the path such hosts take, and
check the run's end: pid 1 of the run's PID namespace is killed from the host, each run has its own network
namespace, nothing a survivor holds can block the host, a forced end is swept by uid, one disk budget holds
for ``/tmp``, ``/sandbox`` and ``/dev/shm``, and closing the sandbox leaves no process for init to reap.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from argym.envs.sandbox import Limits
from argym.envs.sandbox.process import ProcessSandbox
from argym.envs.sandbox.pump import Pump, Started, release

NAME = "argym-survivor"
"""The process name (comm) a hostile run gives itself, so that the host can look for it anywhere."""

OUTLIVE = f"""
import ctypes, time
libc = ctypes.CDLL(None)
libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none (the zygote set SIGKILL)
libc.prctl(15, b"{NAME}", 0, 0, 0)  # PR_SET_NAME
"""
HOLD_STDOUT = OUTLIVE + "print('holding', flush=True)\ntime.sleep(60)\n"
LISTEN = (
    OUTLIVE
    + f"""
import os, socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(b"\\0{NAME}")
s.listen(5)
for fd in (0, 1, 2):
    os.close(fd)
while True:
    c, _ = s.accept()
    c.sendall(b"reached")
    c.close()
"""
)
CONNECT = f"""
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(b"\\0{NAME}")
    print("REACHED", s.recv(16))
except OSError as e:
    print(type(e).__name__)
"""


@pytest.fixture
def no_cgroup(require_backend, tmp_path: Path):
    """One forking slot that makes no cgroup, as on a host where none can be made."""
    require_backend("process")
    sb = ProcessSandbox(
        slots=1, limits=Limits(memory_mb=512, processes=48), tmp_dir=str(tmp_path), cgroups=False
    )
    assert sb.tree_limit.startswith("none")
    yield sb
    sb.close()
    _kill_survivors()


def _survivors() -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and Path(f"/proc/{p}/comm").read_text().strip() == NAME and _state(int(p)) != "Z":
                out.append(int(p))
        except OSError:
            pass
    return out


def _kill_survivors() -> None:
    for p in _survivors():  # never leave one behind, whatever a test saw
        try:
            os.kill(p, 9)
        except OSError:
            pass


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "gone"


def _gone_soon(pids: list[int], within_s: float = 5.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end and any(_state(p) not in ("Z", "gone") for p in pids):
        time.sleep(0.05)
    return not [p for p in pids if _state(p) not in ("Z", "gone")]


def test_a_run_that_clears_its_death_signal_and_holds_its_stdout_ends_at_its_timeout(no_cgroup) -> None:
    sb = no_cgroup
    out: list = []
    t = threading.Thread(
        target=lambda: out.append(
            sb.run(["python", "-c", HOLD_STDOUT], limits=Limits(timeout_s=2), warm=True)
        ),
        daemon=True,
    )
    start = time.monotonic()
    t.start()
    t.join(timeout=30)
    assert out, f"run() with a 2 s timeout was still blocked {time.monotonic() - start:.0f} s later"
    r = out[0]
    assert r.timed_out and r.meta["warm"] and "holding" in r.stdout, r
    assert time.monotonic() - start < 8
    assert not _survivors(), "the run outlived its timeout"
    # the slot is free, and its zygote still forks
    nxt = sb.run(["python", "-c", "print(6 * 7)"], warm=True)
    assert (nxt.stdout, nxt.meta["warm"]) == ("42\n", True), nxt


def test_later_runs_on_its_slot_cannot_reach_a_run_that_closed_its_descriptors(no_cgroup) -> None:
    sb = no_cgroup
    first = sb.run(["python", "-c", LISTEN], limits=Limits(timeout_s=2), warm=True)
    assert first.meta["warm"] and first.timed_out, first
    assert not _survivors(), "the run outlived its timeout"
    later = [sb.run(["python", "-c", CONNECT], warm=True) for _ in range(3)]
    seen = [(r.stdout.strip(), r.meta["warm"]) for r in later]
    assert seen == [("ConnectionRefusedError", True)] * 3, later


def test_each_forked_run_has_its_own_network_namespace_with_loopback(no_cgroup) -> None:
    sb = no_cgroup
    show = (
        "import os, socket\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
        "c = socket.create_connection(s.getsockname(), timeout=2)\n"
        "print(os.readlink('/proc/self/ns/net'), 'loopback')"
    )
    runs = [sb.run(["python", "-c", show], warm=True) for _ in range(2)]
    assert all(r.meta["warm"] and r.stdout.endswith(" loopback\n") for r in runs), runs
    assert runs[0].stdout != runs[1].stdout  # two network namespaces


WRITE_EVERYWHERE = """
import os
total = 0
for d in ('/tmp', '/sandbox', '/dev/shm'):
    try:
        with open(d + '/fill', 'wb') as f:
            for _ in range(64):
                f.write(b'x' * (1 << 20))
                f.flush()
    except OSError:
        pass
    total += os.path.getsize(d + '/fill') if os.path.exists(d + '/fill') else 0
print(total >> 20)
"""


def test_tmp_the_work_dir_and_dev_shm_share_one_disk_budget(no_cgroup) -> None:
    sb = no_cgroup
    r = sb.run(["python", "-c", WRITE_EVERYWHERE], limits=Limits(disk_mb=8, file_size_mb=64), warm=True)
    assert r.meta["warm"] and r.exit_code == 0, r
    assert int(r.stdout) <= 8, f"a run with disk_mb=8 wrote {r.stdout.strip()} MB"
    # and each of the three is usable, the work dir being the run's cwd
    each = (
        "import os\nfor d in ('/tmp', '.', '/dev/shm'): open(d + '/x', 'w').write('x')\n"
        "print(os.getcwd(), sorted(os.listdir('.')), sorted(os.listdir('/tmp')))"
    )
    r = sb.run(["python", "-c", each], warm=True)
    assert r.stdout == "/sandbox ['x'] ['x']\n", r


@pytest.mark.skipif(os.geteuid() != 0, reason="per-slot uids (and so the sweep) exist only as root")
def test_a_forced_end_sweeps_the_slots_uid_but_spares_its_zygote(no_cgroup) -> None:
    """A run killed at its timeout is followed by a sweep of every process of the slot's uid, as a cold
    run's end is: here a process of that uid started outside the sandbox stands for anything of the run the
    kill might have missed. The zygote is spared, and forks the next run."""
    sb = no_cgroup
    assert sb.run(["python", "-c", "pass"], warm=True).meta["warm"]
    zygote = sb.zygote_pids(0)
    uid = sb.uid(0)

    def as_uid() -> None:
        os.setgroups([])
        os.setgid(uid)  # type: ignore[arg-type]
        os.setuid(uid)  # type: ignore[arg-type]

    stray = subprocess.Popen(["sleep", "60"], preexec_fn=as_uid)
    try:
        r = sb.run(["python", "-c", "import time; time.sleep(60)"], limits=Limits(timeout_s=1), warm=True)
        assert r.timed_out, r
        assert stray.wait(timeout=5) == -9
        nxt = sb.run(["python", "-c", "print(1)"], warm=True)
        assert nxt.stdout == "1\n" and nxt.meta["warm"] and sb.zygote_pids(0) == zygote
    finally:
        stray.kill()
        stray.wait()


class _HeldPipes:
    """A started run whose pipes something outside the host's reach keeps open (the test itself): the kill
    reaches nothing, and the run never exits."""

    def __init__(self) -> None:
        out_r, self.out_w = os.pipe()
        err_r, self.err_w = os.pipe()
        self.in_r, in_w = os.pipe()
        self.stdout, self.stderr = os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb")
        self.stdin = os.fdopen(in_w, "wb")
        self.returncode = None
        self.pid = -1

    def wait(self, timeout: float | None = None) -> int:
        threading.Event().wait(timeout)
        raise subprocess.TimeoutExpired("held", timeout or 0.0)

    def poll(self) -> None:
        return None


def test_the_host_never_blocks_on_pipes_a_survivor_holds() -> None:
    """Reading stdout and stderr, feeding a stdin nobody reads: past the timeout and the kill, `Pump.wait`
    and `release` return, whatever still holds the pipes (before, `release` closed stdout under a reader
    thread and blocked for as long as the survivor lived)."""
    held = _HeldPipes()
    run = Started(held, None, None, None, None, None, Limits(timeout_s=0.5))  # type: ignore[arg-type]
    pump = Pump(run, lambda: None)
    done = threading.Event()

    def end() -> None:
        pump.wait(b"x" * (4 << 20), run.limits.timeout_s)  # more than a pipe holds: the feed blocks
        release(run)
        done.set()

    start = time.monotonic()
    threading.Thread(target=end, daemon=True).start()
    try:
        assert done.wait(timeout=20), "the host blocked on pipes a survivor holds"
        assert time.monotonic() - start < 10
    finally:
        for fd in (held.out_w, held.err_w, held.in_r):
            os.close(fd)


def test_closing_leaves_no_process_of_a_zygote_for_init_to_reap(require_backend, tmp_path: Path) -> None:
    """bubblewrap's own init used to outlive bubblewrap at close, a zombie for the host's init to reap;
    the zygote is now pid 1 of bubblewrap's namespace, reaped by bubblewrap, which is reaped here."""
    require_backend("process")
    sb = ProcessSandbox(slots=2, tmp_dir=str(tmp_path))
    try:
        for _ in range(2):
            assert all(r.meta["warm"] for r in sb.run_many([_program()] * 2))
        tree = sb.zygote_pids(0) | sb.zygote_pids(1)
        assert len(tree) >= 4, tree
    finally:
        sb.close()
    left = {p: _state(p) for p in tree if _state(p) != "gone"}
    assert not left, f"processes of the zygotes left after close (Z: a zombie for init to reap): {left}"


def _program():
    from argym.envs.sandbox import Program

    return Program(["python", "-c", "import time; time.sleep(0.2)"], warm=True)
