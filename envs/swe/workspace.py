"""A repository per episode, inside a sandbox: the agent's workspace and the grader's fresh one.

`Workspace.exec(argv, stdin=...)` runs one command in the repository
(``/testbed``) with the sandbox's containment; nothing else touches the tree.
Two backends:

- `ProcessWorkspace` (``process``): a fresh copy of the base repository on the
  host, in a `BoundedDir` (as root a tmpfs of ``disk_mb``, so a command cannot
  write past the disk limit while it runs),
  bound read-write at ``/testbed`` into a `ProcessSandbox` run (bubblewrap:
  no network, own PID namespace, a per-slot uid, rlimits, the tree killed after
  every command, so daemons do not outlive it). Python's pytest comes from a
  read-only copy of argym's own pytest install at ``/opt/argym/site``.
- `DockerWorkspace` (``docker``): one container per workspace from the SWE
  image (``argym-swe``: Debian's python3, pytest and git), the repository copied
  into ``/testbed`` (a volume on a tmpfs of ``disk_mb``, so a command cannot
  write past the disk limit while it runs), commands run as a uid of the
  workspace's own; after every command all of that uid's processes are killed.

Both bind the base commit's pristine git directory read-only at
``/opt/argym/base.git`` (the grader diffs against it, whatever the agent did to
``.git``). `snapshot()` copies the work tree (process) or commits the container and
copies ``/testbed`` out as a tar (docker: a commit leaves volumes out);
`open_workspace` builds a new workspace from it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from argym.envs.sandbox.base import ExecResult, Limits, Sandbox
from argym.envs.sandbox.disk import BoundedDir
from argym.envs.swe.project import cache_root
from argym.errors import ConfigError, MissingDependencyError
from argym.registry import Registry

if TYPE_CHECKING:
    from argym.envs.sandbox.process import ProcessSandbox

ROOT = "/testbed"
BASE_GIT = "/opt/argym/base.git"
SWE_IMAGE = os.environ.get("ARGYM_SWE_IMAGE", "argym-swe:git-pytest-1")
GIT_SAFE = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "safe.directory",
    "GIT_CONFIG_VALUE_0": "*",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "PYTHONDONTWRITEBYTECODE": "1",
}
DEFAULT_LIMITS = Limits(
    timeout_s=60.0, memory_mb=2048, processes=128, file_size_mb=32, disk_mb=256, output_bytes=1 << 20
)


class Workspace(ABC):
    """One repository at ``/testbed`` in a sandbox; `exec` is the only way in."""

    backend: str = "?"

    def __init__(self, limits: Limits):
        self.limits = limits

    @abstractmethod
    def exec(
        self, argv: list[str], *, stdin: bytes | None = None, timeout_s: float | None = None
    ) -> ExecResult:
        """Run `argv` in ``/testbed``; the command's hang, flood or crash is reported, never raised."""

    def shell(
        self, command: str, *, stdin: bytes | None = None, timeout_s: float | None = None
    ) -> ExecResult:
        return self.exec(["bash", "-c", command], stdin=stdin, timeout_s=timeout_s)

    @abstractmethod
    def snapshot(self) -> dict[str, Any]:
        """A picklable handle on a real copy of the workspace (a tree copy or a committed image)."""

    @abstractmethod
    def over_disk_limit(self) -> bool:
        """True if the work tree has grown past the disk limit (the agent's failure)."""

    def close(self) -> None:
        """Remove the workspace."""


# ---- process backend -------------------------------------------------------------------
_ENV_LOCK = threading.Lock()


def test_env(python: str) -> Path:
    """``site/`` (pytest and what it needs, copied from this interpreter's install) and ``bin/python``.

    The sandbox masks every site-packages directory, so the tests get exactly this. pytest comes
    with the ``swe`` extra; without it this raises `MissingDependencyError` (at `reset`), since a
    grader that cannot run the tests must never score the agent. Built once per process, and built
    again if it was removed.
    """
    root = cache_root() / "testenv"
    with _ENV_LOCK:
        if (root / "site" / "pytest").is_dir() and (root / "bin" / "python").exists():
            return root
        try:
            metadata.distribution("pytest")
        except metadata.PackageNotFoundError:
            raise MissingDependencyError(
                "pytest", "swe", "argym/SWE-v0's process backend (it runs the repository's tests with pytest)"
            ) from None
        tmp = Path(tempfile.mkdtemp(dir=cache_root()))
        site = tmp / "site"
        todo, seen = ["pytest"], set()
        while todo:
            name = todo.pop()
            key = name.lower().replace("-", "_")
            if key in seen:
                continue
            seen.add(key)
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue  # a dependency for another platform or Python (colorama, tomli)
            for f in dist.files or []:
                if f.parts[0] == ".." or "__pycache__" in f.parts:
                    continue
                src = Path(str(dist.locate_file(f)))
                if src.is_file():
                    dest = site / f
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src, dest)
            for req in dist.requires or []:
                if "extra ==" not in req:
                    todo.append(
                        req.split(";")[0]
                        .split("[")[0]
                        .split("<")[0]
                        .split(">")[0]
                        .split("=")[0]
                        .split("!")[0]
                        .split("~")[0]
                        .strip()
                    )
        (tmp / "bin").mkdir()
        for name in ("python", "python3"):
            os.symlink(python, tmp / "bin" / name)
        for p in [tmp, *tmp.rglob("*")]:
            if not p.is_symlink():
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if root.exists():  # an incomplete or damaged one: replaced whole
            shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
        return root


def _copy_regular(src: str, dst: str) -> None:
    """copytree's copy function for trees an agent touched: regular files only (no FIFOs, devices)."""
    if stat.S_ISREG(os.lstat(src).st_mode):
        shutil.copy2(src, dst)


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True, copy_function=_copy_regular)


class ProcessWorkspace(Workspace):
    """A host copy of the repository bound into bubblewrap runs (see the module docstring)."""

    backend = "process"

    def __init__(
        self, sandbox: ProcessSandbox, base: Path, limits: Limits = DEFAULT_LIMITS, tree: Path | None = None
    ):
        super().__init__(limits)
        if not hasattr(sandbox, "run_mounted"):
            raise ConfigError("The process workspace needs a ProcessSandbox.")
        self.sandbox = sandbox
        self.base = base
        self._dir = BoundedDir(cache_root(), "ws-", limits.disk_mb)
        self.dir = self._dir.path
        self.repo = self.dir / "repo"
        try:
            copy_tree(tree if tree is not None else base, self.repo)
        except OSError as e:
            self.close()
            raise ConfigError(
                f"The repository does not fit the workspace's disk limit of {limits.disk_mb} MB "
                f"({e}); raise Limits.disk_mb."
            ) from e
        env_root = test_env(sandbox.python)
        from argym.envs.sandbox.confine import Mount

        self.mounts = (
            Mount(str(self.repo), ROOT, True),
            Mount(str(base / ".git"), BASE_GIT),
            Mount(str(env_root / "site"), "/opt/argym/site"),
            Mount(str(env_root / "bin"), "/opt/argym/bin"),
        )
        self.env = {
            **GIT_SAFE,
            "PATH": "/opt/argym/bin:/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": "/opt/argym/site",
            "HOME": "/tmp",
        }

    def exec(
        self, argv: list[str], *, stdin: bytes | None = None, timeout_s: float | None = None
    ) -> ExecResult:
        limits = self.limits.with_(timeout_s=timeout_s or self.limits.timeout_s, cpu_s=None)
        return self.sandbox.run_mounted(
            argv,
            self.mounts,
            chdir=ROOT,
            stdin=stdin,
            env=self.env,
            limits=limits,
        )

    def over_disk_limit(self) -> bool:
        total = 0
        for dirpath, _dirnames, filenames in os.walk(self.repo):
            for name in filenames:
                try:
                    total += os.lstat(os.path.join(dirpath, name)).st_size
                except OSError:
                    pass
        return total > self.limits.disk_mb << 20

    def snapshot(self) -> dict[str, Any]:
        dest = snapshot_dir() / uuid.uuid4().hex
        copy_tree(self.repo, dest)
        return {"backend": "process", "tree": str(dest), "base": str(self.base)}

    def close(self) -> None:
        self._dir.close()


_SNAPSHOTS: list[Path] = []


def snapshot_dir() -> Path:
    """Snapshots outlive the env that took them (restore into a fresh env); removed at exit."""
    if not _SNAPSHOTS:
        d = Path(tempfile.mkdtemp(prefix="argym-swe-snapshots-"))
        atexit.register(shutil.rmtree, d, True)
        _SNAPSHOTS.append(d)
    return _SNAPSHOTS[0]


WorkspaceOpener = Callable[[Sandbox, Path, Limits, dict[str, Any] | None], Workspace]
"""``(sandbox, base, limits, snapshot or None) -> Workspace``: a fresh workspace, or one restored from `snapshot`."""

WORKSPACES: Registry[WorkspaceOpener] = Registry(
    "workspace backend", {"docker": "argym.envs.swe.docker_workspace"}
)
"""Sandbox backend → how a workspace opens on it (``docker``: `DockerWorkspace`); any other backend gets a
`ProcessWorkspace`, a directory on the host that its sandbox binds in."""


def open_workspace(
    sandbox: Sandbox, base: Path, limits: Limits = DEFAULT_LIMITS, snapshot: dict[str, Any] | None = None
) -> Workspace:
    """A fresh workspace of `base` on `sandbox`'s backend, or one restored from a `snapshot()` handle."""
    if snapshot is not None and snapshot.get("backend") != sandbox.backend:
        raise ConfigError(
            f"A {snapshot.get('backend')} snapshot cannot be restored on the {sandbox.backend} backend."
        )
    opener = WORKSPACES.get(sandbox.backend) if sandbox.backend in WORKSPACES else _open_process
    return opener(sandbox, base, limits, snapshot)


def _open_process(
    sandbox: Sandbox, base: Path, limits: Limits, snapshot: dict[str, Any] | None
) -> ProcessWorkspace:
    tree = Path(snapshot["tree"]) if snapshot else None
    return ProcessWorkspace(cast("ProcessSandbox", sandbox), base, limits, tree=tree)  # it checks
