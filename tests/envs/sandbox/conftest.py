"""Fixtures of the sandbox tests: one sandbox per backend, and the checks every hostile case ends with."""

from __future__ import annotations

import os
import shutil

import pytest

from argym.envs.sandbox import Limits, SandboxUnavailable, make_sandbox

BACKENDS = ["process", "docker"]


def docker_available() -> str | None:
    """None if a Docker engine answers, else why not."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed (pip install 'argym[docker]')"
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # noqa: BLE001
        return f"no Docker engine answers at DOCKER_HOST={os.environ.get('DOCKER_HOST', '(default)')}: {e}"
    from argym.envs.sandbox.docker import image_exists

    if not image_exists(client):
        return "the sandbox image is missing: run `argym sandbox build-image`"
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the sandbox is unavailable: {reason}. .ci/setup-docker.sh sets it up.")
    pytest.skip(reason)


@pytest.fixture(scope="session", params=BACKENDS)
def sandbox(request):
    backend = request.param
    if backend == "process" and shutil.which("bwrap") is None:
        _skip_or_fail("bubblewrap is not installed (apt-get install bubblewrap)")
    if backend == "docker":
        why = docker_available()
        if why:
            _skip_or_fail(why)
    try:
        sb = make_sandbox(backend, slots=2, limits=Limits(memory_mb=512, processes=48))
    except SandboxUnavailable as e:
        _skip_or_fail(str(e))
    yield sb
    sb.close()
