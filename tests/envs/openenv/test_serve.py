"""`argym serve`: argym envs driven over OpenEnv's protocol by openenv-core's own client classes."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from openenv.core import GenericEnvClient
from websockets.asyncio.client import connect as ws_connect_async
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

import argym
from argym.envs.executors import Executors
from argym.envs.openenv.models import jsonable


def in_process(
    env_id: str, kwargs: dict[str, Any], seed: int, actions: list[Any], executors: Executors | None = None
) -> list[dict[str, Any]]:
    """What argym's own `reset`/`step` return for `seed` and `actions`, in the wire's field names
    (with `executors`, many calls share one verifier pool instead of starting one each)."""
    env = argym.make(env_id, **kwargs, **({"executors": executors} if executors is not None else {}))
    try:
        obs, info = env.reset(seed=seed)
        out = [{"messages": jsonable(obs), "task_id": info["task_id"], "reward": None, "done": False}]
        for action in actions:
            obs, reward, term, trunc, info = env.step(action)
            out.append(
                {
                    "messages": jsonable(obs),
                    "task_id": info["task_id"],
                    "reward": float(reward),
                    "done": term or trunc,
                    "reward_parts": info["reward_parts"],
                    "verdict": jsonable(info["verdict"]),
                    "success": info["success"],
                    "infra_failure": info["infra_failure"],
                    "terminated": term,
                    "truncated": trunc,
                }
            )
        return out
    finally:
        env.close()


def served(url: str, seed: int, actions: list[Any]) -> list[dict[str, Any]]:
    """The same episode through openenv-core's `GenericEnvClient` (its sync wrapper)."""
    with GenericEnvClient(base_url=url).sync() as client:
        results = [client.reset(seed=seed)]
        for action in actions:
            results.append(client.step(action if isinstance(action, dict) else {"content": action}))
    out = []
    for r in results:
        row = {"reward": r.reward, "done": r.done, **r.observation}
        out.append(row)
    return out


def assert_same(local: list[dict[str, Any]], remote: list[dict[str, Any]]) -> None:
    assert len(local) == len(remote)
    for mine, theirs in zip(local, remote):
        for key, value in mine.items():
            assert theirs[key] == value, key


def oracle(env_id: str, kwargs: dict[str, Any], seed: int) -> Any:
    env = argym.make(env_id, **kwargs)  # builds no pool: the oracle grades nothing
    try:
        env.reset(seed=seed)
        return env.unwrapped.oracle_action()
    finally:
        env.close()


def test_served_math_matches_in_process(serve):
    kwargs = {"max_attempts": 2}
    with serve("argym/Math-v0", env_kwargs=kwargs) as (url, _):
        for seed in (0, 1, 2):
            actions = ["I think \\boxed{-7}", oracle("argym/Math-v0", kwargs, seed)]
            local = in_process("argym/Math-v0", kwargs, seed, actions)
            assert local[-1]["success"] and not local[1]["success"]  # the episode exercises both verdicts
            assert_same(local, served(url, seed, actions))


def test_served_code_matches_in_process(serve, require_backend):
    require_backend("process")
    kwargs = {"tasks": "humaneval", "max_attempts": 2}
    with serve("argym/Code-v0", env_kwargs=kwargs) as (url, _):
        seed = 5
        actions = ["```python\ndef f(:\n```", oracle("argym/Code-v0", kwargs, seed)]
        local = in_process("argym/Code-v0", kwargs, seed, actions)
        assert local[1]["verdict"]["kind"] == "syntax_error" and local[2]["success"]
        assert_same(local, served(url, seed, actions))


RUN = '<tool_call>{"name": "run", "arguments": {"command": "git log --oneline | wc -l"}}</tool_call>'
SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


def test_served_swe_matches_in_process_and_an_idle_session_frees_its_workspace(serve, require_backend):
    require_backend("process")
    from argym.envs.swe.project import cache_root

    kwargs = {"sandbox": "process", "max_turns": 4, "command_timeout_s": 20}
    actions = [RUN, SUBMIT]
    local = in_process("argym/SWE-v0", kwargs, 0, actions)
    assert local[-1]["terminated"] and "FAIL_TO_PASS" in local[-1]["verdict"]

    def workspaces() -> list:
        return sorted(cache_root().glob("ws-*"))

    before = workspaces()
    with serve("argym/SWE-v0", env_kwargs=kwargs, idle_timeout_s=1.0) as (url, env_server):
        assert_same(local, served(url, 0, actions))
        with GenericEnvClient(base_url=url).sync() as idle:
            idle.reset(seed=1)
            assert len(workspaces()) == len(before) + 1 and env_server.active_sessions == 1
            # The reaper looks every 5 s at most. It drops the session from its table first and then
            # closes the env in the session's thread, so the workspace goes a moment after the count.
            deadline = time.monotonic() + 30
            while (env_server.active_sessions or workspaces() != before) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert env_server.active_sessions == 0
            assert workspaces() == before  # the idle session's sandbox workspace is gone
            with pytest.raises(RuntimeError, match="idle longer than the server's idle timeout"):
                idle.step({"content": RUN})


def test_bad_input_gets_clear_errors_and_harms_no_other_session(serve):
    with serve("argym/Math-v0", max_message_mb=0.01) as (url, env_server):
        ws_url = url.replace("http://", "ws://") + "/ws"
        with GenericEnvClient(base_url=url).sync() as bystander:
            first = bystander.reset(seed=4)
            with ws_connect(ws_url) as ws:
                ws.send("{not json")
                assert json.loads(ws.recv())["data"]["code"] == "INVALID_JSON"
                ws.send(json.dumps({"type": "launch"}))
                assert "Unknown message type" in json.loads(ws.recv())["data"]["message"]
                ws.send(json.dumps({"type": "step", "data": {"content": "1"}}))  # before any reset
                assert "before reset()" in json.loads(ws.recv())["data"]["message"]
                ws.send(json.dumps({"type": "step", "data": {"text": "1"}}))  # not the action's schema
                assert json.loads(ws.recv())["data"]["code"] in ("VALIDATION_ERROR", "EXECUTION_ERROR")
                ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
                ws.send(json.dumps({"type": "step", "data": {"content": "\\boxed{0}"}}))
                ws.recv(), ws.recv()
                ws.send(json.dumps({"type": "step", "data": {"content": "again"}}))  # after the end
                assert "after the episode ended" in json.loads(ws.recv())["data"]["message"]
            with ws_connect(ws_url) as ws:  # a huge message closes that connection alone (1009: too big)
                ws.send(json.dumps({"type": "step", "data": {"content": "x" * 100_000}}))
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
            status, body = post(url + "/step", b"x" * 100_000)
            assert status == 413 and "larger than the server's limit" in body["detail"]
            # a body with no length (chunked) is bounded as it streams; a negative length is refused unread
            chunk = b"x" * 100_000
            head = b"POST /step HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            assert raw_status(url, head + b"%x\r\n" % len(chunk) + chunk + b"\r\n") == 413
            assert raw_status(url, b"POST /step HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n") == 400
            status, body = post(url + "/step", b"{broken")
            assert status == 422
            status, body = post(url + "/step", json.dumps({"action": {"content": "1"}}).encode())
            assert status == 409 and "before reset()" in body["detail"] and "/ws" in body["detail"]
            status, body = post(
                url + "/mcp",
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "openenv/session/close",
                        "params": {"session_id": "no-such-session"},
                    }
                ).encode(),
            )
            assert status == 200 and "Unknown session_id" in body["error"]["message"]
            after = bystander.step({"content": "\\boxed{1}"})  # the bystander's episode went on untouched
            assert after.observation["messages"][0] == first.observation["messages"][0]
            assert after.done and env_server.active_sessions == 1


def post(url: str, data: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def raw_status(url: str, request: bytes) -> int:
    """The status of a response to bytes sent as they are (a timeout: the server waited on a body)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        return int(s.recv(65536).split(b" ", 2)[1])


def test_sixteen_concurrent_sessions_limit_and_idle_reaping(serve):
    n, seeds = 16, list(range(100, 116))
    answers = {s: oracle("argym/Math-v0", {}, s) for s in seeds}
    with Executors() as local:
        expected = {s: in_process("argym/Math-v0", {}, s, [answers[s]], local) for s in seeds}

    async def run(url: str, env_server: Any) -> None:
        clients = [GenericEnvClient(base_url=url) for _ in seeds]
        await asyncio.gather(*(c.connect() for c in clients))
        firsts = await asyncio.gather(*(c.reset(seed=s) for c, s in zip(clients, seeds)))
        assert env_server.active_sessions == n
        # one more connection is told at once why it gets no session (and then closed)
        async with ws_connect_async(url.replace("http://", "ws://") + "/ws") as extra:
            refusal = json.loads(await extra.recv())["data"]
        assert refusal["code"] == "CAPACITY_REACHED" and refusal["max_sessions"] == n
        assert env_server.active_sessions == n
        # every client steps with its own seed's answer, all at once: each gets its own episode's result
        results = await asyncio.gather(*(c.step({"content": answers[s]}) for c, s in zip(clients, seeds)))
        for s, first, result in zip(seeds, firsts, results):
            assert first.observation["messages"] == expected[s][0]["messages"]
            assert result.observation["messages"] == expected[s][1]["messages"]
            assert result.observation["task_id"] == expected[s][1]["task_id"] and result.reward == 1.0
        assert len({json.dumps(r.observation["messages"]) for r in results}) == n
        deadline = time.monotonic() + 30  # the reaper looks every 5 s at most
        while env_server.active_sessions and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert env_server.active_sessions == 0  # every idle session was closed
        for c in clients[:2]:
            with pytest.raises(RuntimeError, match="idle longer"):
                await c.reset(seed=0)
        fresh = GenericEnvClient(base_url=url)  # the freed slots take new sessions
        assert (await fresh.reset(seed=7)).observation["messages"] == in_process("argym/Math-v0", {}, 7, [])[
            0
        ]["messages"]
        await asyncio.gather(fresh.disconnect(), *(c.disconnect() for c in clients))

    with serve("argym/Math-v0", max_sessions=n, idle_timeout_s=3.0) as (url, env_server):
        asyncio.run(run(url, env_server))


def test_argym_serve_command_serves_an_env(serve_on_loopback):
    _, url = serve_on_loopback(
        lambda port: [
            sys.executable,
            "-m",
            "argym.cli",
            "serve",
            "argym/Math-v0",
            "max_attempts=2",
            "--port",
            str(port),
        ]
    )
    meta = json.loads(urllib.request.urlopen(url + "/metadata", timeout=5).read())
    assert meta["name"] == "argym/Math-v0"
    remote = served(url, 3, ["\\boxed{-1}"])
    assert_same(in_process("argym/Math-v0", {"max_attempts": 2}, 3, ["\\boxed{-1}"]), remote)
    assert remote[-1]["done"] is False  # max_attempts=2 reached the env


def test_argym_serve_unknown_env_is_a_one_line_error():
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "serve", "argym/Mat-v0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "Did you mean: argym/Math-v0" in out.stderr


@pytest.mark.parametrize(
    "args",
    [["serve", "argym/Math-v0"], ["eval", "argym/OpenEnv-v0", "url=http://127.0.0.1:9", "--agent", "random"]],
)
def test_without_openenv_core_the_error_names_the_extra(args):
    code = (
        "import sys\nsys.modules['openenv'] = None  # as if openenv-core were not installed\n"
        "from argym.cli import main\nmain(sys.argv[1:])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "pip install 'argym[openenv]'" in out.stderr, out.stderr
