"""``argym serve``: any registered argym env over OpenEnv's protocol, on openenv-core's own server.

`ArgymEnvironment` adapts one argym env to OpenEnv's `Environment` (reset /
step / state with `ArgymAction` / `ArgymObservation` / `ArgymState`);
openenv-core's `HTTPEnvServer` serves it, so OpenEnv's clients speak to it
unchanged. Its WebSocket endpoint ``/ws`` is the session protocol: one
connection is one session with its own env, up to ``max_sessions`` at once
(the next connection gets a ``CAPACITY_REACHED`` error); a session idle for
``idle_timeout_s`` is closed by the server's reaper, which closes its env and
so frees its sandbox. The stateless HTTP ``/reset`` and ``/step`` make a fresh
env per request (OpenEnv's design), so an episode needs ``/ws``.

What this module adds around the server: argym's errors become clear HTTP
errors (409 for a step outside an episode, 400 for bad arguments) instead of a
500, an HTTP body larger than ``max_message_mb`` is refused with 413 before it
is read whole, and WebSocket messages are bounded the same way (close code 1009).
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

import argym
from argym.envs.executors import Executors
from argym.envs.openenv.models import ArgymAction, ArgymObservation, ArgymState, jsonable
from argym.errors import ArgymError, ConfigError, EnvStateError

CLOSED = (
    "This session's env was closed: it sat idle longer than the server's idle timeout (or the server is "
    "shutting down), and its sandbox was freed. Open a new connection to start a new session."
)


class ArgymEnvironment(Environment[ArgymAction, ArgymObservation, ArgymState]):
    """One argym env (`argym.make(env_id, **env_kwargs)`) behind OpenEnv's `Environment` interface.

    Sessions are isolated (each has its own env and episode), so the server may
    run many at once; their envs share the server's `executors` (worker pools,
    sandboxes), as a rollout engine's do. `reset` takes ``seed`` (one seed, one
    task, as in-process), ``episode_id`` and ``task_id`` (pins the task).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self, env_id: str, env_kwargs: dict[str, Any] | None = None, executors: Executors | None = None
    ):
        super().__init__()
        self.env_id = env_id
        kwargs = {**(env_kwargs or {}), **({"executors": executors} if executors is not None else {})}
        self._env = argym.make(env_id, **kwargs)
        self._state = ArgymState(env_id=env_id)
        self._closed = False

    @property
    def env(self) -> Any:
        """The argym env this session runs."""
        return self._env

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> ArgymObservation:
        self._check_open()
        if kwargs:
            raise ConfigError(f"reset() takes seed, episode_id and task_id; got also {sorted(kwargs)}.")
        obs, info = self._env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
        self._state = ArgymState(
            env_id=self.env_id,
            episode_id=episode_id or uuid.uuid4().hex,
            step_count=0,
            task_id=info["task_id"],
            split=info["split"],
            done=False,
        )
        return ArgymObservation(messages=jsonable(obs), task_id=info["task_id"], done=False, reward=None)

    def step(self, action: ArgymAction, timeout_s: float | None = None, **kwargs: Any) -> ArgymObservation:
        self._check_open()
        obs, reward, terminated, truncated, info = self._env.step(action.message())
        self._state.step_count += 1
        self._state.done = bool(terminated or truncated)
        return ArgymObservation(
            messages=jsonable(obs),
            reward=float(reward),
            done=self._state.done,
            reward_parts={k: float(v) for k, v in info["reward_parts"].items()},
            verdict=jsonable(info["verdict"]),
            success=bool(info["success"]),
            infra_failure=bool(info["infra_failure"]),
            terminated=bool(terminated),
            truncated=bool(truncated),
            task_id=info["task_id"],
            turn=int(info["turn"]),
        )

    @property
    def state(self) -> ArgymState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        from argym.registration import ENVS

        about = next((e.description for e in ENVS if e.id == self.env_id), "an argym environment")
        return EnvironmentMetadata(name=self.env_id, description=about, version=_argym_version())

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._env.close()

    def _check_open(self) -> None:
        if self._closed:
            raise EnvStateError(CLOSED)


@dataclass
class ServeConfig:
    """What ``argym serve`` serves and its limits."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    max_sessions: int = 16
    idle_timeout_s: float = 600.0
    max_message_mb: float = 4.0

    def __post_init__(self) -> None:
        if int(self.max_sessions) < 1:
            raise ConfigError(f"max_sessions must be at least 1, got {self.max_sessions}.")
        if self.idle_timeout_s <= 0 or self.max_message_mb <= 0:
            raise ConfigError(
                f"idle_timeout_s and max_message_mb must be positive, got "
                f"{self.idle_timeout_s} and {self.max_message_mb}."
            )

    @property
    def max_message_bytes(self) -> int:
        return int(self.max_message_mb * 2**20)


def build_app(cfg: ServeConfig) -> tuple[FastAPI, HTTPEnvServer]:
    """The FastAPI app serving `cfg.env_id` and the OpenEnv server behind it (for its session counts).

    Makes (and closes) one env first, so an unknown id or a bad kwarg fails here, not in every session.
    The server owns the executors its sessions' envs share (16 sessions, one verifier pool) and closes
    them at shutdown.
    """
    argym.make(cfg.env_id, **cfg.env_kwargs).close()
    executors = Executors()
    server = HTTPEnvServer(
        functools.partial(ArgymEnvironment, cfg.env_id, dict(cfg.env_kwargs), executors),
        ArgymAction,
        ArgymObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=int(cfg.max_sessions), session_timeout=float(cfg.idle_timeout_s)
        ),
    )
    app = FastAPI(title=f"argym {cfg.env_id} (OpenEnv protocol)")
    server.register_routes(app)
    app.router.on_shutdown.append(executors.close)  # after openenv's own (its sessions' envs)
    app.add_exception_handler(ArgymError, _argym_error)
    app.add_middleware(BodyLimit, max_bytes=cfg.max_message_bytes)
    return app, server


async def _argym_error(request: Request, exc: Exception) -> JSONResponse:
    """argym's errors as HTTP errors that say what happened, instead of a bare 500."""
    detail = str(exc)
    if isinstance(exc, EnvStateError):
        detail += (
            " (OpenEnv's HTTP /reset and /step are stateless: each request gets a fresh env. "
            "Play an episode over the WebSocket /ws, e.g. with openenv's EnvClient.)"
        )
        return JSONResponse({"detail": detail}, status_code=409)
    return JSONResponse({"detail": detail}, status_code=400)


class BodyLimit:
    """ASGI middleware: an HTTP request body over `max_bytes` gets 413 and is never read whole."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await self._refuse(send)
                return
        body, replayed = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any) -> None:
        body = json.dumps(
            {
                "detail": f"Request body is larger than the server's limit of {self.max_bytes} bytes "
                f"(argym serve --max-message-mb)."
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def make_server(cfg: ServeConfig, host: str = "127.0.0.1", port: int = 8000) -> tuple[Any, HTTPEnvServer]:
    """A `uvicorn.Server` for `cfg` (call `.run()`) and the OpenEnv server in it (its live sessions).

    WebSocket messages are bounded like HTTP bodies (a larger one closes that connection with code 1009).
    """
    import uvicorn

    app, env_server = build_app(cfg)
    return uvicorn.Server(
        uvicorn.Config(
            app, host=host, port=port, ws_max_size=cfg.max_message_bytes, log_level="warning", lifespan="on"
        )
    ), env_server


def _argym_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("argym")
    except PackageNotFoundError:
        return "unknown"
