"""An MCP server written with the official SDK, for the ToolCall-v0 MCP tests.

Usage: python mcp_server.py PIDFILE [--http PORT]. Writes its pid to PIDFILE, then serves over stdio (default)
or streamable HTTP on 127.0.0.1:PORT at /mcp.
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer

server = MCPServer("argym-test")
store: dict[str, str] = {}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def remember(key: str, value: str) -> str:
    """Keep a value under a key (state lives as long as the server)."""
    store[key] = value
    return "ok"


@server.tool()
def recall(key: str) -> str:
    """The value kept under a key."""
    if key not in store:
        raise KeyError(f"no value under {key!r}")
    return store[key]


@server.tool()
def nap(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "awake"


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))
    if "--http" in sys.argv:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run("stdio")
