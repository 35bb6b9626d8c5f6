"""Fixtures of the SWE tests: an env per backend (docker runs for real where an engine answers; CI requires it),
a small instance file, and agents that act through the tools."""

from __future__ import annotations

import os

import pytest

import argym
from argym.envs.swe.instances import SHIPPED, read_instances

BACKENDS = ["process", "docker"]
FULL = os.environ.get("ARGYM_TEST_FULL") == "1"


def sample_ids() -> list[str]:
    """A representative sample: one instance per project, alternating splits (all of them with FULL)."""
    instances = read_instances(SHIPPED)
    if FULL:
        return [i.instance_id for i in instances]
    out: list[str] = []
    for n, repo in enumerate(sorted({i.repo for i in instances})):
        split = ("test", "train")[n % 2]
        out.append(next(i.instance_id for i in instances if i.repo == repo and i.split == split))
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def env(request, need):
    need(request.param)
    e = argym.make(
        "argym/SWE-v0", split="all", sandbox=request.param, max_turns=12, command_timeout_s=20
    ).unwrapped
    yield e
    e.close()


@pytest.fixture(scope="module")
def penv(need):
    """The process-backend env (tool behaviour is backend-independent code)."""
    need("process")
    e = argym.make(
        "argym/SWE-v0", split="all", max_turns=40, command_timeout_s=5, max_output_chars=400
    ).unwrapped
    yield e
    e.close()


@pytest.fixture(scope="session")
def swe_sandbox():
    """`swe_sandbox(backend)`: the sandbox SWE-v0 builds for `backend`, shared by the session's tests, closed at its end."""
    from argym.envs.executors import Executors
    from argym.envs.swe.env import swe_sandbox

    with Executors() as executors:
        yield lambda backend: swe_sandbox(executors, backend)


@pytest.fixture(scope="session")
def sample() -> list[str]:
    """`sample_ids()`, as a fixture (test modules cannot import conftest under --import-mode=importlib)."""
    return sample_ids()


@pytest.fixture(scope="session")
def need(require_backend):
    """`need(backend)`: skip (in CI fail) unless `backend` can run SWE workspaces (docker: the SWE image)."""
    from argym.envs.swe.workspace import SWE_IMAGE

    return lambda backend: require_backend(backend, image=SWE_IMAGE if backend == "docker" else None)
