"""MCP tool servers as an env's tools, through the official `mcp` SDK.

A spec names the server:

- ``mcp:COMMAND ARG ...``: a stdio server; argym starts it (the command line is
  split like a shell's, without a shell) and stops it on `close`;
- ``mcp+http://HOST:PORT/PATH`` (or ``mcp+https://``): a streamable-HTTP
  server someone else runs.

`MCPTools` connects at construction and lists the server's tools as OpenAI
function schemas (`schemas`). `call` runs one call under a deadline and
returns ``(ok, text)``: ``ok`` is False when the tool reported an error
(``isError``), which is the agent's to read. A call past its deadline raises
`DeadlineExceeded` and the connection is replaced (a stdio server is killed
and started again), like a tool worker past its deadline. A server that
cannot start, whose connection drops, or that crashes mid-call raises
`InfrastructureError`: the harness's fault, never the agent's.

The SDK's client is async and its session lives in the task that opened it,
so each `MCPTools` owns a `LoopThread` and one long-lived connection task on it.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Any

from argym.envs.executors import DeadlineExceeded
from argym.envs.loop import LoopThread, LoopTimeout
from argym.errors import ConfigError, InfrastructureError, MissingDependencyError

PREFIXES = ("mcp:", "mcp+http://", "mcp+https://")
MAX_RESULT_CHARS = 16_000
"""A tool result longer than this is cut (with a note), so one call cannot flood the context."""


def is_mcp_spec(tools: Any) -> bool:
    return isinstance(tools, str) and tools.startswith(PREFIXES)


def parse_spec(spec: str) -> tuple[str, Any]:
    """``("stdio", [command, *args])`` or ``("http", url)``; `ConfigError` for anything else."""
    if spec.startswith(("mcp+http://", "mcp+https://")):
        return "http", spec[len("mcp+") :]
    if spec.startswith("mcp:"):
        try:
            argv = shlex.split(spec[len("mcp:") :])
        except ValueError as e:
            raise ConfigError(f"Cannot split the MCP command {spec!r}: {e}.") from None
        if argv:
            return "stdio", argv
    raise ConfigError(
        f"An MCP tool server spec is 'mcp:COMMAND ARG ...' (stdio) or "
        f"'mcp+http://HOST:PORT/PATH' (streamable HTTP); got {spec!r}."
    )


def openai_schema(tool: Any) -> dict[str, Any]:
    """An MCP tool (name, description, inputSchema) as an OpenAI function tool."""
    params = dict(tool.input_schema or {"type": "object", "properties": {}})
    params.pop("title", None)
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description or "", "parameters": params},
    }


def result_text(result: Any) -> str:
    """The text an agent reads from a `CallToolResult`: its text parts, else its structured content."""
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'content')} omitted]")
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... cut: {len(text):,} characters in all]"
    return text


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside the task groups' exception groups the SDK raises."""
    while getattr(error, "exceptions", None):
        error = error.exceptions[0]  # type: ignore[attr-defined]
    return error


class MCPTools:
    """One MCP server's tools: `schemas`, `call(name, arguments)`, `close()`."""

    def __init__(self, spec: str, timeout_s: float = 5.0, connect_timeout_s: float = 30.0):
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise MissingDependencyError("mcp", "mcp", "MCP tool servers (tools='mcp:...')") from None
        self.spec = spec
        self.kind, self.target = parse_spec(spec)
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self._loop = LoopThread(name="argym-mcp")
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._conn: asyncio.Task | None = None
        self.schemas: list[dict[str, Any]] = []
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    # ---- connection ----------------------------------------------------------------------------------
    def _transport(self) -> Any:
        if self.kind == "http":
            return self.target
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command, *args = self.target
        return stdio_client(StdioServerParameters(command=command, args=args))

    async def _hold(self, ready: asyncio.Future) -> None:
        """Open the session, list the tools, and keep the session open until `_stop` is set."""
        from mcp.client.client import Client

        self._stop = asyncio.Event()
        try:
            async with Client(self._transport()) as client:
                listed = await client.list_tools()
                self._client = client
                if not ready.done():
                    ready.set_result([openai_schema(t) for t in listed.tools])
                await self._stop.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else RuntimeError(repr(e)))
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            self._client = None

    def _connect(self) -> None:
        async def start() -> asyncio.Future:
            ready = asyncio.get_running_loop().create_future()
            self._conn = asyncio.ensure_future(self._hold(ready))
            return ready

        async def wait(ready: asyncio.Future) -> list[dict[str, Any]]:
            return await ready

        ready = self._loop.run(start())
        try:
            schemas = self._loop.run(wait(ready), timeout_s=self.connect_timeout_s)
        except LoopTimeout:
            self._disconnect()
            raise InfrastructureError(
                f"The MCP server {self.spec!r} did not answer within {self.connect_timeout_s:g} s."
            ) from None
        except Exception as e:
            self._disconnect()
            cause = _leaf(e)
            raise InfrastructureError(
                f"Cannot connect to the MCP server {self.spec!r}: {type(cause).__name__}: {cause}"
            ) from e
        if self.schemas and [s["function"]["name"] for s in schemas] != [
            s["function"]["name"] for s in self.schemas
        ]:
            raise InfrastructureError(f"The MCP server {self.spec!r} offers other tools after restarting.")
        self.schemas = schemas

    def _disconnect(self) -> None:
        """End the session (a stdio server is stopped by the SDK's transport); waits for it."""
        conn, stop = self._conn, self._stop
        self._conn = None
        if conn is None or not self._loop.alive:
            return

        async def end() -> None:
            if stop is not None:
                stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(conn), 5.0)
            except (TimeoutError, Exception):
                conn.cancel()
                await asyncio.gather(conn, return_exceptions=True)

        try:
            self._loop.run(end(), timeout_s=15.0)
        except (LoopTimeout, RuntimeError):
            pass

    # ---- calls ---------------------------------------------------------------------------------------
    def call(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """Run one tool call: ``(True, text)``, or ``(False, the tool's error text)``.

        `DeadlineExceeded` past `timeout_s` (the connection is then replaced);
        `InfrastructureError` if the server is gone or dies during the call.
        """
        if self._conn is None or self._conn.done() or self._client is None:
            self._disconnect()
            self._connect()  # a dropped server is started (or reconnected) once; failing that, it is infra
        client = self._client
        try:
            result = self._loop.run(client.call_tool(name, arguments), timeout_s=self.timeout_s)
        except LoopTimeout:
            self._disconnect()
            raise DeadlineExceeded(
                f"{name} did not finish within {self.timeout_s:g} s; the MCP connection was replaced."
            ) from None
        except Exception as e:  # the SDK's MCPError ("Connection closed"), a broken pipe, an HTTP error
            self._disconnect()
            cause = _leaf(e)
            raise InfrastructureError(
                f"The MCP server {self.spec!r} failed during {name}: {type(cause).__name__}: {cause}"
            ) from e
        return not result.is_error, result_text(result)

    def close(self) -> None:
        """Stop the session (and a stdio server) and the event loop; safe to call twice."""
        if self._loop.alive:
            self._disconnect()
        self._loop.close()

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
