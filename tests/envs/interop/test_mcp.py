"""ToolCall-v0 with MCP tool servers, through the official `mcp` SDK: a server written with the SDK
(stdio and streamable HTTP, started here) and the published `mcp-server-time` package."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import argym
from argym.envs.tools.mcp import MCPTools, parse_spec
from argym.errors import ConfigError, InfrastructureError

SERVER = Path(__file__).with_name("mcp_server.py")
TASKS = [
    {
        "id": "sum",
        "prompt": "What is 1234 + 4321? Use the add tool.",
        "answer": 5555,
        "plan": [[{"name": "add", "arguments": {"a": 1234, "b": 4321}}]],
    },
    {
        "id": "memo",
        "prompt": "Remember 'blue' under 'color', then tell me what is under 'color'.",
        "answer": "blue",
        "answer_type": "text",
    },
]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is not running
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def tasks_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({**t, "split": "test"}) + "\n" for t in TASKS))
    return str(path)


@pytest.fixture
def stdio_spec(tmp_path):
    pidfile = tmp_path / "server.pid"
    return f"mcp:{sys.executable} {SERVER} {pidfile}", pidfile


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pidfile = tmp_path_factory.mktemp("http") / "server.pid"
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), str(pidfile), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the HTTP MCP test server did not start")
    yield f"mcp+http://127.0.0.1:{port}/mcp"
    proc.kill()
    proc.wait(timeout=10)


def test_the_servers_tools_are_the_envs_and_calls_go_to_it(stdio_spec, tasks_file):
    spec, _ = stdio_spec
    with argym.make("argym/ToolCall-v0", tools=spec, tasks=tasks_file) as env:
        obs, _ = env.reset(options={"task_id": "sum"})
        names = [t["function"]["name"] for t in env.unwrapped.task.tools]
        assert names == ["add", "remember", "recall", "nap", "crash"]
        assert '"name": "add"' in obs[0]["content"] and "Add two integers." in obs[0]["content"]
        obs, _, term, _, info = env.step(env.unwrapped.oracle_action())
        assert obs[-1] == {"role": "tool", "tool_call_id": "call_0", "name": "add", "content": "5555"}
        assert not term and info["verdict"]["errors"] == []
        _, reward, term, _, info = env.step("The sum is 5555.")
        assert term and reward == 1.0 and info["success"]


def test_state_lives_in_the_server_across_calls(stdio_spec, tasks_file):
    spec, _ = stdio_spec
    with argym.make("argym/ToolCall-v0", tools=spec, tasks=tasks_file) as env:
        env.reset(options={"task_id": "memo"})
        env.step(
            '<tool_call>{"name": "remember", "arguments": {"key": "color", "value": "blue"}}</tool_call>'
        )
        obs, *_ = env.step('<tool_call>{"name": "recall", "arguments": {"key": "color"}}</tool_call>')
        assert obs[-1]["content"] == "blue"
        _, reward, *_ = env.step("It is blue.")
        assert reward == 1.0


def test_tool_errors_and_bad_arguments_are_observations(stdio_spec, tasks_file):
    spec, _ = stdio_spec
    with argym.make("argym/ToolCall-v0", tools=spec, tasks=tasks_file) as env:
        env.reset(options={"task_id": "memo"})
        obs, _, term, _, info = env.step(
            '<tool_call>{"name": "recall", "arguments": {"key": "nope"}}</tool_call>'
        )
        assert not term and not info["infra_failure"]
        assert (
            obs[-1]["content"].startswith("Error: recall failed:")
            and "no value under 'nope'" in obs[-1]["content"]
        )
        obs, _, term, _, info = env.step('<tool_call>{"name": "add", "arguments": {"a": "one"}}</tool_call>')
        assert not term and "Invalid arguments for 'add'" in obs[-1]["content"]  # checked against its schema
        obs, *_ = env.step('<tool_call>{"name": "launch", "arguments": {}}</tool_call>')
        assert "Unknown tool 'launch'" in obs[-1]["content"]


def test_a_hanging_tool_hits_the_deadline_and_the_episode_goes_on(stdio_spec, tasks_file):
    spec, pidfile = stdio_spec
    with argym.make("argym/ToolCall-v0", tools=spec, tasks=tasks_file, timeout_s=1.0) as env:
        env.reset(options={"task_id": "sum"})
        first = int(pidfile.read_text())
        start = time.monotonic()
        obs, _, term, _, info = env.step(
            '<tool_call>{"name": "nap", "arguments": {"seconds": 60}}</tool_call>'
        )
        assert time.monotonic() - start < 20
        assert not term and not info["infra_failure"]
        assert "did not finish within 1 s" in obs[-1]["content"]
        obs, *_ = env.step('<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>')
        assert obs[-1]["content"] == "5"  # a fresh server answers
        assert int(pidfile.read_text()) != first and not alive(first)


def test_a_server_crash_is_an_infrastructure_failure(stdio_spec, tasks_file):
    spec, _ = stdio_spec
    with argym.make("argym/ToolCall-v0", tools=spec, tasks=tasks_file) as env:
        env.reset(options={"task_id": "sum"})
        _, reward, term, _, info = env.step('<tool_call>{"name": "crash", "arguments": {}}</tool_call>')
        assert term and info["infra_failure"] and reward == 0.0
        assert "failed during crash" in info["verdict"]["errors"][-1]


def test_close_stops_the_server_and_the_loop(stdio_spec, tasks_file):
    import threading

    spec, pidfile = stdio_spec
    before = {t.name for t in threading.enumerate()}
    env = argym.make("argym/ToolCall-v0", tools=spec, tasks=tasks_file)
    pid = int(pidfile.read_text())
    assert alive(pid)
    env.close()
    assert not alive(pid)
    assert "argym-mcp" not in {t.name for t in threading.enumerate()} - before


def test_streamable_http_server(http_server, tasks_file):
    with argym.make("argym/ToolCall-v0", tools=http_server, tasks=tasks_file) as env:
        env.reset(options={"task_id": "sum"})
        obs, *_ = env.step(env.unwrapped.oracle_action())
        assert obs[-1]["content"] == "5555"
        _, reward, *_ = env.step("5555")
        assert reward == 1.0


TIME_SERVER = Path(sys.prefix) / "mcp-servers" / "time"
"""`mcp-server-time` (PyPI) installed apart (`make dev`: pip install --target): its release that runs on the MCP
SDK 2.x needs mcp>=2.3, while verifiers 0.4.0 pins mcp==2.0.0 in argym's environment. A stdio server is its own
process, so it runs on its own SDK, as `uvx mcp-server-time` would."""


def test_a_published_server_mcp_server_time(tmp_path, require_backend):
    if not (TIME_SERVER / "mcp_server_time").is_dir():
        require_backend.unavailable(
            f"mcp-server-time is not installed in {TIME_SERVER} (make dev installs it)"
        )
    path = tmp_path / "time.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "tokyo",
                "split": "test",
                "answer": "23:30",
                "answer_type": "text",
                "prompt": "It is 14:30 in UTC. What time is it in Tokyo?",
            }
        )
        + "\n"
    )
    spec = f"mcp:env PYTHONPATH={TIME_SERVER} {sys.executable} -m mcp_server_time --local-timezone UTC"
    with argym.make("argym/ToolCall-v0", tools=spec, tasks=str(path)) as env:
        env.reset(options={"task_id": "tokyo"})
        assert {t["function"]["name"] for t in env.unwrapped.task.tools} == {
            "get_current_time",
            "convert_time",
        }
        obs, *_ = env.step(
            '<tool_call>{"name": "convert_time", "arguments": {"source_timezone": "UTC", '
            '"time": "14:30", "target_timezone": "Asia/Tokyo"}}</tool_call>'
        )
        assert '"Asia/Tokyo"' in obs[-1]["content"] and "T23:30:00+09:00" in obs[-1]["content"]
        _, reward, *_ = env.step("It is 23:30 in Tokyo.")
        assert reward == 1.0


def test_servers_that_cannot_start_and_bad_specs_are_clear(tmp_path, tasks_file):
    with pytest.raises(InfrastructureError, match="Cannot connect to the MCP server"):
        MCPTools(f"mcp:{tmp_path}/no-such-server")
    with pytest.raises(InfrastructureError, match="Cannot connect to the MCP server"):
        MCPTools(f"mcp:{sys.executable} -c 'import sys; sys.exit(2)'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InfrastructureError, match="Cannot connect to the MCP server"):
        MCPTools(f"mcp+http://127.0.0.1:{port}/mcp", connect_timeout_s=20)
    with pytest.raises(ConfigError, match="mcp:COMMAND"):
        parse_spec("mcp:")
    with pytest.raises(ConfigError, match="names an MCP server"):
        argym.make("argym/ToolCall-v0", tools="stdio:foo", tasks=tasks_file)
    with pytest.raises(ConfigError, match="give tasks= a JSONL file"):
        argym.make("argym/ToolCall-v0", tools=f"mcp:{sys.executable} {SERVER} {tmp_path / 'p'}")
