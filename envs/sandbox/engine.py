"""The Docker engine side of `DockerSandbox`: connecting, the labels that name a sandbox's containers and
their owning process, removing leftovers (`cleanup`, `reap_orphans`), and starting a confined container.

The confinement itself (no network, capped memory, CPU, pids and files, dropped capabilities, a read-only
root) is described in `argym.envs.sandbox.docker`.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from argym.envs.sandbox.base import Limits, SandboxError, SandboxUnavailable
from argym.envs.sandbox.pool import ContainerPool
from argym.errors import MissingDependencyError

IMAGE = os.environ.get("ARGYM_SANDBOX_IMAGE", "argym-sandbox:latest")
LABEL = "argym.sandbox"
NOBODY = 65534


def client_from_env() -> Any:
    try:
        import docker
    except ImportError:
        raise MissingDependencyError("docker", "docker", "The docker sandbox backend") from None
    try:
        c = docker.from_env()
        c.ping()
        return c
    except Exception as e:
        raise SandboxUnavailable(
            f"No Docker engine answers (DOCKER_HOST={os.environ.get('DOCKER_HOST', 'unset')}): {e}. Start one "
            f"(`source .ci/setup-docker.sh` starts a private dockerd) or use the process backend (sandbox='process')."
        ) from None


def image_exists(client: Any, image: str = IMAGE) -> bool:
    try:
        client.images.get(image)
        return True
    except Exception:
        return False


def cleanup(client: Any | None = None, everything: bool = False) -> int:
    """Remove the leftovers of crashed runs: containers labelled ``argym.sandbox`` whose owning process is gone
    (`reap_orphans`); with `everything`, every labelled container, live runs' included. Returns how many."""
    client = client or client_from_env()
    if not everything:
        return reap_orphans(client)
    n = 0
    for c in listed(client, LABEL):
        try:
            client.api.remove_container(c["Id"], force=True, v=True)
            n += 1
        except Exception:
            pass
    for v in client.volumes.list(
        filters={"label": LABEL}
    ):  # a session's work dir, once its container is gone
        try:
            v.remove()
        except Exception:
            pass
    return n


def listed(client: Any, label: str) -> list[dict[str, Any]]:
    """The engine's summaries (``Id``, ``Labels``) of the containers with `label`, in one call: the high-level
    ``containers.list`` inspects each one afterwards and fails on one removed in between (pools remove
    containers in the background, and other sandboxes share the engine)."""
    return client.api.containers(all=True, filters={"label": label})


def process_tag(pid: int) -> str | None:
    """``host:boot id:pid:start time`` of a live process of this machine (None if there is none): unlike a pid
    alone, it names one process, not a later one that reuses the number."""
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        return None
    return f"{socket.gethostname()}:{boot}:{pid}:{stat.rsplit(b')', 1)[1].split()[19].decode()}"


def reap_orphans(client: Any) -> int:
    """Remove the containers whose owning process ran on this machine and is gone; returns how many.

    Containers of live processes, of other machines sharing the engine, or without the label are left alone.
    """
    mine = (process_tag(os.getpid()) or "").rsplit(":", 2)[0]
    n = 0
    for c in listed(client, f"{LABEL}.process"):
        tag = (c.get("Labels") or {}).get(f"{LABEL}.process", "")
        host, _, rest = tag.rpartition(":")[0].rpartition(":")
        if host != mine or not rest.isdigit() or process_tag(int(rest)) == tag:
            continue
        try:
            client.api.remove_container(c["Id"], force=True, v=True)  # v: its tmpfs work-dir volume too
            n += 1
        except Exception:
            pass
    return n


def shutdown(client: Any, owner: str, pools: tuple[ContainerPool, ...]) -> None:
    for p in pools:
        p.close()  # no more containers made in the background
    _remove_owned(client, owner)


def _remove_owned(client: Any, owner: str) -> None:
    if owner.split("-")[0] != str(os.getpid()):
        return  # a forked child exiting: the containers are its parent's
    for c in listed(client, f"{LABEL}.owner={owner}"):
        try:
            client.api.remove_container(c["Id"], force=True, v=True)
        except Exception:
            pass


def _confinement(limits: Limits, labels: dict[str, str], cpu: int, *more: tuple[str, int]) -> dict[str, Any]:
    """The ``containers.run`` arguments both kinds of container share: no network, memory, CPU and pids
    limits, dropped capabilities, an init process, and the rlimits (`cpu` seconds, file size, open files, no
    core dumps, then `more`)."""
    import docker

    rlimits = (("cpu", cpu), ("fsize", limits.file_size_mb << 20), ("nofile", limits.open_files), ("core", 0))
    return dict(
        detach=True,
        network_mode="none",
        user="0",
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        nano_cpus=1_000_000_000,
        pids_limit=limits.processes,
        cap_drop=["ALL"],
        cap_add=["SETUID", "SETGID", "KILL"],
        security_opt=["no-new-privileges"],
        init=True,
        labels=labels,
        ulimits=[docker.types.Ulimit(name=n, soft=v, hard=v) for n, v in (*rlimits, *more)],
    )


def run_box(client: Any, image: str, labels: dict[str, str], limits: Limits, cpu: int) -> Any:
    """A started container for one run: the confinement of the module docstring, idle until used."""
    size = f"size={limits.disk_mb}m,mode=1777"
    try:
        return client.containers.run(
            image,
            ["sleep", "infinity"],
            read_only=True,
            tmpfs={"/sandbox": size + f",uid={NOBODY},gid={NOBODY}", "/tmp": size},
            working_dir="/sandbox",
            **_confinement(limits, labels, cpu),
        )  # no "as": runc itself needs more address space
    except Exception as e:
        raise SandboxError(f"could not start a sandbox container from {image!r}: {e}") from e


def session_box(
    client: Any,
    labels: dict[str, str],
    owner: str,
    limits: Limits,
    image: str,
    workdir: str,
    tmp_mb: int,
    workdir_mb: int | None,
) -> Any:
    """A started session container (`DockerSandbox.start_session`), idle until its first command."""
    import docker

    cpu = limits.cpu_s or int(limits.timeout_s) + 1
    mounts = (
        []
        if workdir_mb is None
        else [
            docker.types.Mount(
                workdir,
                None,
                type="volume",
                labels={LABEL: "1", f"{LABEL}.owner": owner},
                driver_config=docker.types.DriverConfig(
                    "local", {"type": "tmpfs", "device": "tmpfs", "o": f"size={workdir_mb}m"}
                ),
            )
        ]
    )
    try:
        return client.containers.run(
            image,
            ["sleep", "infinity"],
            mounts=mounts,
            tmpfs={"/tmp": f"size={tmp_mb}m,mode=1777"},
            working_dir=workdir,
            **_confinement(limits, labels, cpu, ("nproc", max(limits.processes - 16, 8))),
        )  # room for root's kill_user
    except Exception as e:
        raise SandboxError(f"could not start a session container from {image!r}: {e}") from e
