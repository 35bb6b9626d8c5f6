"""Base repositories built from shipped sources: an sdist, the instance's base code, one fresh commit.

A synthesised instance's repository is its project's PyPI sdist (shipped in
`argym.envs.swe.instances.DATA_DIR`) with the gold patch reverted: that is
the base code. It becomes a git repository by a fresh ``git init`` and one
commit with a fixed author and date, so the commit id is the same on every
machine (the instance's ``base_commit``, checked on every build) and no
later history, tag, reflog or remote exists to leak the fix.

Trees are built once per process and cached in a private temporary directory
(world-readable, so sandbox uids can bind them read-only).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path

from argym.errors import ConfigError, InfrastructureError

GIT_ENV = {
    "GIT_AUTHOR_NAME": "argym",
    "GIT_AUTHOR_EMAIL": "argym@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_NAME": "argym",
    "GIT_COMMITTER_EMAIL": "argym@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_COUNT": "3",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
    "GIT_CONFIG_KEY_1": "init.defaultBranch",
    "GIT_CONFIG_VALUE_1": "main",
    "GIT_CONFIG_KEY_2": "core.autocrlf",
    "GIT_CONFIG_VALUE_2": "false",
}

_LOCK = threading.Lock()
_CACHE: dict[str, Path] = {}
_ROOT: list[Path] = []


def cache_root() -> Path:
    """This process's cache directory, named by its pid: removed at exit, and reaped by the next process
    to start if this one was killed (found by `argym check`'s resources check)."""
    if not _ROOT:
        from argym.envs.sandbox.disk import orphans, reap

        for orphan in orphans(Path(tempfile.gettempdir()), "argym-swe-"):
            reap(orphan, "ws-")  # its workspaces (unmounted) first, then the rest of it
        reap(Path(tempfile.gettempdir()), "argym-swe-")
        root = Path(tempfile.mkdtemp(prefix=f"argym-swe-{os.getpid()}-"))
        os.chmod(root, 0o755)
        atexit.register(shutil.rmtree, root, True)
        _ROOT.append(root)
    return _ROOT[0]


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    """Run host git on a tree argym built itself (never on one an agent touched)."""
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    r = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=120)
    if r.returncode != 0:
        raise InfrastructureError(
            f"git {' '.join(args)} failed in {cwd}: {r.stderr.decode(errors='replace')[:500]}"
        )
    return r.stdout.decode("utf-8", errors="replace")


def sdist_tree(sdist: str | Path) -> Path:
    """The extracted sdist (its single top directory), cached; `sdist` is a path or a name in DATA_DIR."""
    from argym.envs.swe.instances import DATA_DIR

    path = Path(sdist) if Path(sdist).is_absolute() else DATA_DIR / sdist
    if not path.is_file():
        raise ConfigError(f"The source archive {str(path)!r} does not exist.")
    key = f"sdist:{path.resolve()}"
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        dest = cache_root() / ("src-" + hashlib.sha256(key.encode()).hexdigest()[:12])
        try:
            with tarfile.open(path) as tar:
                tar.extractall(dest, filter="data")
        except tarfile.TarError as e:
            raise ConfigError(f"{path} is not a usable sdist archive (.tar.gz): {e}") from None
        tops = list(dest.iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise ConfigError(f"{path} does not hold one top-level directory, as an sdist does.")
        _CACHE[key] = tops[0]
        return tops[0]


def build_repo(tree: Path, dest: Path, revert_patch: str = "") -> str:
    """Copy `tree` to `dest`, revert `revert_patch` in it, make it a one-commit repository; returns the commit."""
    shutil.copytree(tree, dest, symlinks=True)
    if revert_patch:
        try:
            git(dest, "apply", "-R", "-", stdin=revert_patch.encode())
        except InfrastructureError as e:
            raise ConfigError(f"The instance's patch does not revert on its source: {e}") from None
    git(dest, "init", "-q")
    git(dest, "add", "-A", "-f", ".")
    git(dest, "commit", "-q", "--no-gpg-sign", "-m", "base")
    for p in [dest, *dest.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, (p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0)) & 0o7777)
    return git(dest, "rev-parse", "HEAD").strip()


def base_repo(sdist: str, patch: str, base_commit: str | None = None) -> Path:
    """The instance's base repository (cached): `sdist` with the gold `patch` reverted, one commit.

    With `base_commit`, the built commit must have that id (the tree is exactly the instance's).
    """
    key = f"repo:{sdist}:{hashlib.sha256(patch.encode()).hexdigest()}"
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is None:
        tree = sdist_tree(sdist)
        dest = cache_root() / ("repo-" + hashlib.sha256(key.encode()).hexdigest()[:16])
        if dest.exists():
            shutil.rmtree(dest)
        build_repo(tree, dest, patch)
        with _LOCK:
            cached = _CACHE.setdefault(key, dest)
    if base_commit is not None:
        head = git(cached, "rev-parse", "HEAD").strip()
        if head != base_commit:
            raise ConfigError(
                f"Building the repository from {sdist} gave commit {head}, not the instance's "
                f"base_commit {base_commit}: the source archive or the patch differs from the "
                f"one the instance was made from."
            )
    return cached
