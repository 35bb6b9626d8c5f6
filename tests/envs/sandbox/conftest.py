"""Fixtures of the sandbox tests: one sandbox per backend, and the checks every hostile case ends with."""

from __future__ import annotations

import pytest

from argym.envs.sandbox import Limits, SandboxUnavailable, make_sandbox

BACKENDS = ["process", "docker"]


@pytest.fixture(scope="session", params=BACKENDS)
def sandbox(request, require_backend):
    backend = request.param
    require_backend(backend)
    try:
        sb = make_sandbox(backend, slots=2, limits=Limits(memory_mb=512, processes=48))
    except SandboxUnavailable as e:
        require_backend.unavailable(str(e))
    yield sb
    sb.close()
