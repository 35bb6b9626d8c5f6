"""Building the Docker sandbox image (`argym sandbox build-image`).

From a base image (default ``python:3.11-slim``) when a registry is reachable,
or from Debian packages (``debootstrap --variant=minbase`` + ``docker import``)
when it is not. The image needs only ``python3`` and coreutils' ``timeout``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argym.envs.sandbox.engine import IMAGE, client_from_env
from argym.errors import ConfigError

DEFAULT_BASE = "python:3.11-slim"


def build_image(
    tag: str = IMAGE,
    base: str = DEFAULT_BASE,
    debootstrap: str | None = None,
    client: Any = None,
    swe: bool = False,
) -> str:
    """Build `tag`; ``debootstrap="bookworm"`` builds from Debian packages instead of `base`.

    ``swe=True`` builds argym/SWE-v0's image instead: the same base plus git, patch
    and pytest, with ``/testbed`` owned by ``nobody``.
    """
    client = client or client_from_env()
    if swe:
        return _build_swe_image(client, tag, base, debootstrap)
    if debootstrap:
        return _import_debian(
            client,
            tag,
            debootstrap,
            "python3-minimal,python3",
            lambda root: (root / "sandbox").mkdir(exist_ok=True),
            workdir="/sandbox",
        )
    dockerfile = f"FROM {base}\nRUN mkdir -p /sandbox\nWORKDIR /sandbox\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return tag


def _build_swe_image(client: Any, tag: str, base: str, debootstrap: str | None) -> str:
    if debootstrap:

        def prepare(root: Path) -> None:
            (root / "testbed").mkdir(exist_ok=True)
            (root / "opt" / "argym").mkdir(parents=True, exist_ok=True)
            os.chown(root / "testbed", 65534, 65534)

        return _import_debian(
            client,
            tag,
            debootstrap,
            "python3-minimal,python3,python3-pytest,git,patch",
            prepare,
            workdir="/testbed",
        )
    dockerfile = (
        f"FROM {base}\nRUN apt-get update && apt-get install -y --no-install-recommends git patch "
        f"&& rm -rf /var/lib/apt/lists/* && pip install --no-cache-dir pytest\n"
        f"RUN mkdir -p /testbed /opt/argym && chown 65534:65534 /testbed\nWORKDIR /testbed\n"
    )
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return tag


def _import_debian(
    client: Any, tag: str, suite: str, packages: str, prepare: Callable[[Path], None], workdir: str
) -> str:
    """An image from Debian packages, no registry needed: debootstrap `suite` with `packages`,
    `prepare(rootfs)`, then `docker import` it as `tag`."""
    if shutil.which("debootstrap") is None:
        raise ConfigError("debootstrap is not installed (apt-get install debootstrap).")
    with tempfile.TemporaryDirectory(prefix="argym-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={packages}", suite, str(root)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        prepare(root)
        tar = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
        repo, _, version = tag.partition(":")
        client.api.import_image_from_file(
            str(tar), repository=repo, tag=version or "latest", changes=[f"WORKDIR {workdir}"]
        )
    return tag
