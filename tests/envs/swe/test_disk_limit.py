"""The workspace's disk limit holds while a command runs, on both backends (issue 15, finding 8).

Checking the tree's size after a command let one command write 721 MB against
a 256 MB limit; the work tree is now a size-limited filesystem, so writes past
the limit fail as they happen and the host never holds more than the limit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from argym.envs.sandbox.disk import BoundedDir
from argym.envs.swe.docker_workspace import DockerWorkspace, _tar_of
from argym.envs.swe.project import cache_root
from argym.envs.swe.workspace import DEFAULT_LIMITS, ROOT, SWE_IMAGE, open_workspace

LIMIT_MB = 24
FLOOD = "for i in $(seq 20); do head -c 5000000 /dev/zero > f$i || break; done; echo wrote $i"


@pytest.fixture
def base():
    """A small git repository where the sandbox's uid can read it (not under pytest's private tmp)."""
    path = Path(tempfile.mkdtemp(dir=cache_root())) / "base"
    os.chmod(path.parent, 0o755)
    yield _repo(path)
    shutil.rmtree(path.parent)


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "a.py").write_text("x = 1\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def _host_bytes(tree: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(tree) for f in files)


@pytest.mark.parametrize("backend", ["process", "docker"])
def test_a_command_cannot_write_past_the_disk_limit_while_it_runs(
    backend, need, require_backend, base, swe_sandbox
) -> None:
    need(backend)
    ws = open_workspace(swe_sandbox(backend), base, DEFAULT_LIMITS.with_(disk_mb=LIMIT_MB))
    try:
        if backend == "process" and not ws._dir.bounded:
            require_backend.unavailable("a size-limited workspace needs root to mount its tmpfs")
        r = ws.shell(FLOOD)
        assert "No space left on device" in r.stderr, (r.stdout, r.stderr[-500:])
        used = ws.shell(f"du -sk {ROOT} | cut -f1")
        assert int(used.stdout.split()[0]) <= LIMIT_MB * 1024
        if backend == "process":
            assert _host_bytes(ws.repo) <= LIMIT_MB << 20  # what the host holds, measured on the host
        assert ws.shell("rm -f f*; echo ok > note.txt; git status --porcelain").stdout.split() == [
            "??",
            "note.txt",
        ]
        again = open_workspace(
            swe_sandbox(backend), base, DEFAULT_LIMITS.with_(disk_mb=LIMIT_MB), snapshot=ws.snapshot()
        )  # a snapshot restores into a bounded workspace too
        try:
            assert again.shell("cat note.txt").stdout.strip() == "ok"
            assert "No space left on device" in again.shell(FLOOD).stderr
        finally:
            again.close()
    finally:
        ws.close()


def test_an_image_workspace_starts_with_the_images_repository_and_is_bounded(need, base, swe_sandbox) -> None:
    """SWE-bench instances start from their image's /testbed: copied into the bounded volume, not hidden by it."""
    need("docker")
    sandbox = swe_sandbox("docker")
    box = sandbox.start_session(DEFAULT_LIMITS, image=SWE_IMAGE)
    try:
        box.put_archive("/", _tar_of(base, ROOT.lstrip("/"), 65534))
        sandbox.exec_in(box, ["chmod", "-R", "a+rwX", ROOT], user="65534")  # as SWE-bench images are prepared
        image = box.commit(repository="argym-test-image-workspace", tag="t").id
    finally:
        box.remove(force=True, v=True)
    try:
        ws = DockerWorkspace(sandbox, None, DEFAULT_LIMITS.with_(disk_mb=LIMIT_MB), image=image)
        try:
            assert ws.shell("cat a.py && git log --oneline | wc -l").stdout.split() == ["x", "=", "1", "1"]
            assert "No space left on device" in ws.shell(FLOOD).stderr
        finally:
            ws.close()
    finally:
        sandbox.client.images.remove(image, force=True)


def test_a_bounded_dir_left_by_a_killed_process_is_unmounted_and_removed(require_backend, tmp_path) -> None:
    code = (
        "import os\nfrom pathlib import Path\nfrom argym.envs.sandbox.disk import BoundedDir\n"
        f"d = BoundedDir(Path({str(tmp_path)!r}), 'ws-', 8)\nprint(d.path, d.bounded, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )  # no exit handler runs
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    ).stdout.split()
    left, bounded = Path(out[0]), out[1] == "True"
    if not bounded:
        require_backend.unavailable("a size-limited directory needs root to mount its tmpfs")
    assert left.exists() and os.path.ismount(left)
    fresh = BoundedDir(tmp_path, "ws-", 8)
    try:
        assert not left.exists() and not os.path.ismount(left) and fresh.bounded
        with pytest.raises(OSError, match="No space left"):
            (fresh.path / "big").write_bytes(b"0" * (9 << 20))
    finally:
        fresh.close()
    assert not fresh.path.exists()
