"""The endpoint's HTTP edge: a request body is bounded and declared, and a client that leaves costs nothing.

The agent behind the endpoint here is a message agent (no model), so each test takes milliseconds.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from urllib.parse import urlparse

import pytest

from argym.agents.endpoint import PolicyEndpoint
from argym.agents.policy import SamplingParams


class EchoAgent:
    """A message agent: answers "ok", after `delay_s`, and counts its calls."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s, self.calls = delay_s, 0

    def act(self, messages, env):
        time.sleep(self.delay_s)
        self.calls += 1
        return "ok"


@pytest.fixture
def endpoint():
    endpoints: list[PolicyEndpoint] = []

    def make(agent=None, **kwargs) -> PolicyEndpoint:
        endpoints.append(PolicyEndpoint(agent or EchoAgent(), SamplingParams(max_new_tokens=4), **kwargs))
        return endpoints[-1]

    yield make
    for e in endpoints:
        e.close()


def connect(endpoint: PolicyEndpoint) -> socket.socket:
    url = urlparse(endpoint.url)
    return socket.create_connection((url.hostname, url.port), timeout=5)


def exchange(endpoint: PolicyEndpoint, head: str, body: bytes = b"") -> tuple[int, dict[str, str], dict]:
    """Send `head` (the request line and headers) and `body` raw; the status, headers and JSON answer.

    A socket timeout (5 s) fails the test: the server waited on a body it should have refused."""
    with connect(endpoint) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        top, rest = data.split(b"\r\n\r\n", 1)
        lines = top.decode().split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
        while len(rest) < int(headers["content-length"]):
            rest += s.recv(65536)
    return int(lines[0].split()[1]), headers, json.loads(rest)


def post_head(length: str | None, path: str = "/v1/chat/completions") -> str:
    head = f"POST {path} HTTP/1.1\nHost: x\nContent-Type: application/json\n"
    return head + (f"Content-Length: {length}\n" if length is not None else "")


CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()


def test_a_body_over_the_cap_is_refused_unread(endpoint):
    """A declared 256 MiB body gets a 413 at once: the server reads none of it and closes the connection."""
    e = endpoint(max_body_bytes=1024)
    status, headers, answer = exchange(e, post_head(str(256 * 2**20)))
    assert status == 413 and answer["error"]["code"] == "request_too_large"
    assert "limit of 1024" in answer["error"]["message"] and headers["connection"] == "close"
    status, _, answer = exchange(e, post_head(str(len(CHAT))), CHAT)  # under the cap: served
    assert status == 200 and answer["choices"][0]["message"]["content"] == "ok"


@pytest.mark.parametrize(
    ("length", "status"), [("-1", 400), ("abc", 400), ("1e3", 400), ("+5", 400), (None, 411)]
)
def test_a_missing_or_malformed_length_is_refused_without_waiting(endpoint, length, status):
    """`Content-Length: -1` used to read until the client hung up; now it, and no length at all, get an answer."""
    got, headers, answer = exchange(endpoint(), post_head(length))
    assert got == status and headers["connection"] == "close"
    assert "Content-Length" in answer["error"]["message"]


def test_an_unknown_route_reads_the_body_so_keep_alive_goes_on(endpoint):
    """A POST to another path is a 404 whose body was consumed: the next request on the connection is served."""
    e = endpoint()
    with connect(e) as s:
        for path in ("/v1/completions", "/v1/chat/completions"):
            s.sendall(post_head(str(len(CHAT)), path).replace("\n", "\r\n").encode() + b"\r\n" + CHAT)
            data = b""
            while not data.endswith(b"}"):
                data += s.recv(65536)
            assert data.startswith(b"HTTP/1.1 404" if path == "/v1/completions" else b"HTTP/1.1 200")


def abort(s: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a killed program's socket does."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def test_a_client_that_leaves_prints_no_traceback(endpoint, capfd):
    """A client gone mid-body, or gone before its answer, is not an error of the server's: nothing on stderr."""
    agent = EchoAgent(delay_s=0.3)
    e = endpoint(agent)
    s = connect(e)  # leaves mid-body
    s.sendall(post_head("1000").replace("\n", "\r\n").encode() + b"\r\n" + CHAT[:10])
    abort(s)
    s = connect(e)  # leaves while its answer is made
    s.sendall(post_head(str(len(CHAT))).replace("\n", "\r\n").encode() + b"\r\n" + CHAT)
    time.sleep(0.1)
    abort(s)
    deadline = time.monotonic() + 5
    while agent.calls < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # the answer's write fails after the agent returns
    status, _, _ = exchange(e, post_head(str(len(CHAT))), CHAT)  # the endpoint serves on
    assert status == 200 and agent.calls == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
