"""Building the Docker sandbox image (`argym sandbox build-image`).

From a base image (default ``python:3.11-slim``) when a registry is reachable,
or from Debian packages (``debootstrap --variant=minbase`` + ``docker import``)
when it is not. The image needs only ``python3`` and coreutils' ``timeout``.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from argym.errors import ConfigError
from argym.envs.sandbox.docker import IMAGE, client_from_env

DEFAULT_BASE = "python:3.11-slim"


def build_image(tag: str = IMAGE, base: str = DEFAULT_BASE, debootstrap: str | None = None,
                client: Any = None) -> str:
    """Build `tag`; ``debootstrap="bookworm"`` builds from Debian packages instead of `base`."""
    client = client or client_from_env()
    if debootstrap:
        if shutil.which("debootstrap") is None:
            raise ConfigError("debootstrap is not installed (apt-get install debootstrap).")
        with tempfile.TemporaryDirectory(prefix="argym-rootfs-") as tmp:
            root = Path(tmp) / "rootfs"
            subprocess.run(["debootstrap", "--variant=minbase", "--include=python3-minimal,python3", debootstrap,
                            str(root)], check=True, stdout=subprocess.DEVNULL)
            (root / "sandbox").mkdir(exist_ok=True)
            tar = Path(tmp) / "rootfs.tar"
            subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
            repo, _, version = tag.partition(":")
            client.api.import_image_from_file(str(tar), repository=repo, tag=version or "latest",
                                              changes=["WORKDIR /sandbox"])
        return tag
    dockerfile = f"FROM {base}\nRUN mkdir -p /sandbox\nWORKDIR /sandbox\n"
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return tag
