"""`DockerWorkspace`: the SWE repository in a container of the SWE image (`argym.envs.swe.workspace` says
what a workspace is and how the two backends differ), and the tar copies its snapshots are made of."""

from __future__ import annotations

import atexit
import io
import os
import secrets
import tarfile
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any

from argym.envs.sandbox.base import ExecResult, Limits, SandboxError
from argym.envs.sandbox.engine import LABEL
from argym.envs.swe.workspace import (
    BASE_GIT,
    DEFAULT_LIMITS,
    GIT_SAFE,
    ROOT,
    SWE_IMAGE,
    WORKSPACES,
    Workspace,
    snapshot_dir,
)

_IMAGES: list[tuple[Any, str]] = []


def _remove_snapshot_images() -> None:
    for client, image in _IMAGES:
        try:
            client.images.remove(image, force=True)
        except Exception:
            pass


def _tar_of(tree: Path, arcroot: str, uid: int) -> bytes:
    return _tar_of_trees([(tree, arcroot, uid)])


def _tar_of_trees(parts: list[tuple[Path, str, int]]) -> bytes:
    """One tar of several trees, each at its `arcroot` and owned by its uid: one `put_archive` (each call
    costs the engine a helper process) copies them all."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for tree, arcroot, uid in parts:

            def owner(info: tarfile.TarInfo, uid: int = uid) -> tarfile.TarInfo:
                info.uid = info.gid = uid
                info.uname = info.gname = ""
                return info

            tar.add(str(tree), arcname=arcroot, filter=owner)
    return buf.getvalue()


def _save_tree(box: Any, dest: Path) -> None:
    """``/testbed`` of a container (started or only created) as a tar file at `dest`."""
    stream, _ = box.get_archive(ROOT)
    with open(dest, "wb") as f:
        for chunk in stream:
            f.write(chunk)


_IMAGE_TREES: dict[str, str] = {}
_IMAGE_TREES_LOCK = threading.Lock()


def _image_tree(client: Any, image: str) -> str:
    """An image's own ``/testbed`` as a tar file (once per image and process), read from a container
    that is created, never started."""
    with _IMAGE_TREES_LOCK:
        if image not in _IMAGE_TREES:
            box = client.containers.create(image, ["true"], network_disabled=True, labels={LABEL: "1"})
            try:
                dest = snapshot_dir() / f"image-{uuid.uuid4().hex}.tar"
                _save_tree(box, dest)
            finally:
                box.remove(force=True)
            _IMAGE_TREES[image] = str(dest)
        return _IMAGE_TREES[image]


class DockerWorkspace(Workspace):
    """A container of the SWE image with the repository in ``/testbed`` (see the module docstring)."""

    backend = "docker"

    def __init__(
        self,
        sandbox: Any,
        base: Path | None,
        limits: Limits = DEFAULT_LIMITS,
        image: str | None = None,
        uid: int | None = None,
        tree: str | None = None,
    ):
        """From `base` (a fresh copy), or `image` (its ``/testbed``), or `image` and `tree` (a snapshot's tar).

        ``/testbed`` is a tmpfs volume of ``disk_mb`` that starts empty: the repository
        goes in as a tar (the base's, the image's own, or the snapshot's).
        """
        super().__init__(limits)
        self.sandbox = sandbox
        self.base = base
        # A uid of its own per workspace: the container's nproc rlimit counts per uid across the
        # whole host, so a shared uid (nobody) would let one workspace's fork bomb starve the others.
        self.uid = (
            uid if uid is not None else secrets.randbelow(1 << 30) + (1 << 24)
        )  # above the process sandbox's uid pool
        if image is not None and tree is None:
            tree = _image_tree(sandbox.client, image)
        # a fresh workspace of a shipped instance: every one runs in the SWE image, so the next
        # episode's container is started ahead in the sandbox's session pool (docs/sandboxes.md)
        self._pooled = image is None
        self.box = sandbox.start_session(
            limits,
            image=image or SWE_IMAGE,
            workdir=ROOT,
            tmp_mb=limits.disk_mb,
            workdir_mb=limits.disk_mb,
            pooled=self._pooled,
        )
        # removed with the workspace even if nobody closes it (an env dropped unclosed); at exit at the latest
        self._finalizer = weakref.finalize(self, _remove_container, self.box, os.getpid())
        try:
            if image is None:  # a fresh workspace: copy the base repository in
                assert base is not None
                trees = [(base, ROOT.lstrip("/"), self.uid), (base / ".git", BASE_GIT.lstrip("/"), 0)]
                self.box.put_archive("/", _tar_of_trees(trees))
            else:
                assert tree is not None  # given, or the image's own
                with open(tree, "rb") as f:
                    self.box.put_archive("/", f)
        except Exception as e:
            self.close()
            raise SandboxError(f"could not copy the repository into the container: {e}") from e

    def exec(
        self, argv: list[str], *, stdin: bytes | None = None, timeout_s: float | None = None
    ) -> ExecResult:
        try:
            return self._exec(argv, stdin, timeout_s)
        except SandboxError:
            raise
        except Exception as e:
            raise SandboxError(f"lost the workspace container: {e}") from e

    def _exec(self, argv: list[str], stdin: bytes | None, timeout_s: float | None) -> ExecResult:
        limits = self.limits.with_(timeout_s=timeout_s or self.limits.timeout_s, cpu_s=None)
        if stdin is not None:  # exec has no stdin: the data goes in as a root-owned file first
            name = f"stdin-{uuid.uuid4().hex}"
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(stdin), 0o644
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.addfile(info, io.BytesIO(stdin))
            self.box.put_archive("/opt/argym", buf.getvalue())
            argv = ["sh", "-c", f'exec "$@" < /opt/argym/{name}', "sh", *argv]
        try:
            return self.sandbox.exec_in(
                self.box, argv, user=str(self.uid), workdir=ROOT, env=GIT_SAFE, limits=limits
            )
        finally:
            self.sandbox.kill_user(self.box, str(self.uid))

    def over_disk_limit(self) -> bool:
        r = self.sandbox.exec_in(
            self.box, ["du", "-sm", ROOT], user="0", workdir="/", limits=self.limits.with_(timeout_s=30)
        )
        try:
            return int(r.stdout.split()[0]) > self.limits.disk_mb
        except (IndexError, ValueError):
            return False

    def snapshot(self) -> dict[str, Any]:
        image = self.box.commit(repository="argym-swe-snapshot", tag=uuid.uuid4().hex[:16])
        if not _IMAGES:
            atexit.register(_remove_snapshot_images)
        _IMAGES.append((self.sandbox.client, image.id))
        tree = snapshot_dir() / f"{uuid.uuid4().hex}.tar"
        _save_tree(self.box, tree)
        return {
            "backend": "docker",
            "image": image.id,
            "uid": self.uid,
            "tree": str(tree),
            "base": str(self.base) if self.base else "",
        }

    def close(self) -> None:
        """Remove the container; a pooled one in the background (`end_session`), off `reset`'s path."""
        if self._finalizer.detach() is not None:
            if self._pooled:
                self.sandbox.end_session(self.box)
            else:
                _remove_container(self.box, os.getpid())


def _remove_container(box: Any, owner_pid: int) -> None:
    if os.getpid() != owner_pid:
        return  # a forked child exiting: the container is its parent's
    try:
        box.remove(force=True, v=True)  # v: its tmpfs /testbed volume too
    except Exception:
        pass


@WORKSPACES.register("docker")
def _open(sandbox: Any, base: Path, limits: Limits, snapshot: dict[str, Any] | None) -> DockerWorkspace:
    """A fresh workspace of `base`, or one restored from a `DockerWorkspace.snapshot()` handle."""
    if snapshot is None:
        return DockerWorkspace(sandbox, base, limits)
    return DockerWorkspace(
        sandbox, base, limits, image=snapshot["image"], uid=snapshot["uid"], tree=snapshot["tree"]
    )
