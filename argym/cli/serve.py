"""`argym serve`: an argym env over OpenEnv's protocol."""

from __future__ import annotations

import click

from argym.cli.app import cli
from argym.cli.common import console, parse_kwargs, user_errors


@cli.command()
@click.argument("env_id")
@click.argument("env_kwargs", nargs=-1)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8000, show_default=True, help="Port.")
@click.option(
    "--max-sessions", type=int, default=16, show_default=True, help="Most sessions (connections) at once."
)
@click.option(
    "--idle-timeout",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds before an idle session is closed and its sandbox freed.",
)
@click.option(
    "--max-message-mb", type=float, default=4.0, show_default=True, help="Largest request or message."
)
def serve(
    env_id: str,
    env_kwargs: tuple[str, ...],
    host: str,
    port: int,
    max_sessions: int,
    idle_timeout: float,
    max_message_mb: float,
) -> None:
    """Serve ENV_ID over OpenEnv's protocol (WebSocket /ws; HTTP /reset, /step, /state, /schema, /health)."""
    from argym.errors import MissingDependencyError

    with user_errors():
        try:
            from argym.envs.openenv.server import ServeConfig, make_server
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in ("openenv", "fastapi", "uvicorn"):
                raise
            raise MissingDependencyError("openenv-core", "openenv", "argym serve") from None
        server, _ = make_server(
            ServeConfig(env_id, parse_kwargs(env_kwargs), max_sessions, idle_timeout, max_message_mb),
            host,
            port,
        )
    console().print(
        f"argym serve: {env_id} at http://{host}:{port} (OpenEnv: ws://{host}:{port}/ws)", markup=False
    )
    server.run()
