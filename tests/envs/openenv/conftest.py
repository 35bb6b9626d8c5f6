"""Fixtures of the OpenEnv interop tests: an argym env served on loopback by openenv-core's server."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def _serve(env_id: str, **options: Any) -> Iterator[tuple[str, Any]]:
    from argym.envs.openenv.server import ServeConfig, make_server

    kwargs = options.pop("env_kwargs", {})
    server, env_server = make_server(ServeConfig(env_id, kwargs, **options), "127.0.0.1", 0)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", env_server
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def serve():
    """`with serve(env_id, env_kwargs={...}, max_sessions=..., idle_timeout_s=...) as (url, env_server)`:
    the env served in this process on a free loopback port (its sessions visible on `env_server`)."""
    return _serve
