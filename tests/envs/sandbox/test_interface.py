"""The `Sandbox.run` interface on every backend, the process backend's refusals, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from argym.envs.sandbox import Limits, SandboxUnavailable, make_sandbox


def test_run_files_stdin_and_limits(sandbox) -> None:
    r = sandbox.run(
        ["python", "-c", "import sys; print(open('data.txt').read(), sys.stdin.read())"],
        stdin=b"from-stdin",
        files={"data.txt": "from-file"},
    )
    assert (r.exit_code, r.timed_out, r.output_truncated) == (0, False, False)
    assert r.stdout.split() == ["from-file", "from-stdin"] and r.result is None
    r = sandbox.run(["python", "-c", "import time; time.sleep(30)"], limits=sandbox.limits.with_(timeout_s=1))
    assert r.timed_out and r.wall_s < 15
    r = sandbox.run(["python", "-c", "print('x' * 10**6)"], limits=sandbox.limits.with_(output_bytes=1000))
    assert r.output_truncated and len(r.stdout) <= 1000
    r = sandbox.run(["python", "-c", "import sys; sys.exit(3)"])
    assert r.exit_code == 3


def test_result_channel_is_separate_from_the_output(sandbox) -> None:
    code = (
        "import os, sys\nprint('noise')\nfd = int(os.environ['ARGYM_RESULT_FD'])\n"
        "os.write(fd, b'RECORD') if fd != 1 else sys.stdout.write('RECORD')"
    )
    r = sandbox.run(["python", "-c", code], result_channel=True)
    assert r.result is not None and b"RECORD" in r.result


def test_run_many_gives_each_program_its_own_result_in_order(sandbox) -> None:
    from argym.envs.sandbox import Program

    programs = [
        Program(["python", "-c", "import sys; print(sys.stdin.read() * 2)"], stdin=b"ab"),
        Program(["python", "-c", "import sys; sys.exit(4)"]),
        Program(["python", "-c", "print(open('f').read())"], files={"f": "file"}),
    ]
    many = sandbox.run_many(programs)
    one_by_one = [sandbox.run(p.argv, stdin=p.stdin, files=p.files) for p in programs]
    assert [(r.stdout, r.exit_code) for r in many] == [(r.stdout, r.exit_code) for r in one_by_one]
    assert [(r.stdout, r.exit_code) for r in many] == [("abab\n", 0), ("", 4), ("file\n", 0)]
    assert sandbox.run_many([]) == []


def test_process_backend_refuses_without_bubblewrap(monkeypatch) -> None:
    import argym.envs.sandbox.process as process

    monkeypatch.setattr(process.shutil, "which", lambda name: None if name == "bwrap" else "/usr/bin/" + name)
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*allow_weak=True"):
        process.ProcessSandbox()
    weak = process.ProcessSandbox(allow_weak=True, limits=Limits(timeout_s=5))
    try:
        r = weak.run(["python", "-c", "print(6 * 7)"])
        assert r.stdout.strip() == "42"
    finally:
        weak.close()


def test_unknown_backend() -> None:
    with pytest.raises(
        ValueError, match="Unknown sandbox backend 'vm'.*Registered: docker, process, process-weak"
    ):
        make_sandbox("vm")


def test_cli_sandbox_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "sandbox", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "build-image" in out.stdout and "cleanup" in out.stdout
    if os.environ.get("DOCKER_HOST") or os.path.exists("/var/run/docker.sock"):
        out = subprocess.run(
            [sys.executable, "-m", "argym.cli", "sandbox", "cleanup"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode in (0, 2), out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="per-slot uids are used only as root")
def test_process_sandboxes_lease_distinct_uids_and_never_kill_each_others_runs(tmp_path) -> None:
    """Two sandboxes (here in two processes) each clean up their uids after every run; with shared uids
    the second one's cleanup would kill the first one's running program."""
    import shutil
    import textwrap
    import threading

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    from argym.envs.sandbox.process import ProcessSandbox

    a = ProcessSandbox(slots=2, limits=Limits(timeout_s=20))
    try:
        uids_a = {a.uid(0), a.uid(1)}
        other = textwrap.dedent("""
            from argym.envs.sandbox.process import ProcessSandbox
            b = ProcessSandbox(slots=2)
            print(b.uid(0), b.uid(1), flush=True)
            for _ in range(20):
                b.run(["python", "-c", "pass"])
            b.close()
        """)
        result = {}
        t = threading.Thread(
            target=lambda: result.update(
                r=a.run(["python", "-c", "import time; time.sleep(4); print('survived')"])
            )
        )
        t.start()
        proc = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, timeout=120)
        t.join(60)
        assert proc.returncode == 0, proc.stderr[-2000:]
        uids_b = {int(x) for x in proc.stdout.split()}
        assert len(uids_a) == 2 and len(uids_b) == 2 and not uids_a & uids_b
        assert result["r"].exit_code == 0 and result["r"].stdout.strip() == "survived"
        assert _leases_held_here(uids_a) == uids_a
    finally:
        a.close()
    # a closed sandbox's uids are free again: this process holds no lease on them (another test's sandbox,
    # in another process, may take one at once, so this reads the locks rather than leasing one back)
    assert _leases_held_here(uids_a) == set()


def _leases_held_here(uids: set[int | None]) -> set[int | None]:
    """The uids among `uids` whose lease file this process holds an flock on (/proc/locks)."""
    from argym.envs.sandbox.uids import LEASE_DIR

    by_inode = {os.stat(os.path.join(LEASE_DIR, str(u))).st_ino: u for u in uids}
    held = set()
    with open("/proc/locks") as f:
        for line in f:
            fields = line.split()  # "1: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF"; waiters have "->"
            if len(fields) > 5 and fields[1] == "FLOCK" and int(fields[4]) == os.getpid():
                inode = int(fields[5].rsplit(":", 1)[1])
                if inode in by_inode:
                    held.add(by_inode[inode])
    return held


def test_bubblewrap_failing_before_the_command_is_a_sandbox_error(require_backend) -> None:
    """A mount bubblewrap cannot make (the SWE test environment gone) is the harness's fault: an error,
    never an exit code the caller would score as the program's."""
    import tempfile

    from argym.envs.sandbox import SandboxError
    from argym.envs.sandbox.confine import Mount
    from argym.envs.sandbox.process import ProcessSandbox

    require_backend("process")
    with ProcessSandbox(slots=1) as sb, tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)  # reachable by the sandbox's uid
        ok = sb.run_mounted(["sh", "-c", "ls /opt/here; exit 1"], (Mount(d, "/opt/here"),), chdir="/")
        assert ok.exit_code == 1  # the command's own failure stays a result
        with pytest.raises(SandboxError, match="Can't find source path"):
            sb.run_mounted(["true"], (Mount(os.path.join(d, "gone"), "/opt/gone"),), chdir="/")
        killed = sb.run(["python", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
        assert killed.exit_code == 137 and not killed.timed_out  # a program killed by a signal is its own


def test_a_broken_bubblewrap_binary_is_a_sandbox_error(broken_bwrap_sandbox) -> None:
    from argym.envs.sandbox import SandboxError

    with pytest.raises(SandboxError, match="bubblewrap failed before the command ran.*namespace failed"):
        broken_bwrap_sandbox.run(["python", "-c", "print(1)"])
