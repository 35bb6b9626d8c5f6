"""The board server under hostile or malformed requests: nothing reflected unescaped, a CSP on every response,
an answer (404/400/500) to every request, never a dropped connection."""

from __future__ import annotations

import http.client
import json
import logging
import socket
from urllib.parse import urlparse

import pytest

import argym.leaderboards as lb
from argym.leaderboards.server import serve_in_thread

SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def server(result, lb_db):
    lb.submit(result([True] * 3 + [False], agent="a"))
    srv, base = serve_in_thread(lb_db)
    yield urlparse(base).netloc
    srv.shutdown()
    srv.server_close()


def _request(netloc: str, path: str, method: str = "GET") -> tuple[int, http.client.HTTPMessage, str]:
    """One request with `path` sent as is (no client-side quoting); a dropped connection raises."""
    conn = http.client.HTTPConnection(netloc, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.headers, r.read().decode("utf-8", errors="replace")
    finally:
        conn.close()


def _assert_hardened(headers: http.client.HTTPMessage) -> None:
    csp = headers.get("Content-Security-Policy", "")
    assert "default-src 'none'" in csp and "script-src" not in csp, csp
    assert headers.get("X-Content-Type-Options") == "nosniff"


def test_a_reflected_path_is_escaped(server):
    status, headers, body = _request(server, "/%3Cscript%3Ealert(1)%3C/script%3E")
    assert status == 404 and headers.get_content_type() == "text/html"
    assert "<script" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    _assert_hardened(headers)
    # a query is reflected into the filter form: escaped there too
    status, _, body = _request(server, "/?agent=%22%3E%3Cscript%3Ealert(1)%3C/script%3E")
    assert status == 200 and "<script" not in body and "&lt;script&gt;" in body


def test_every_response_carries_the_security_headers(server):
    for path, want in [
        ("/", 200),
        ("/api/boards", 200),
        ("/submissions/1", 200),
        ("/api/submissions/1", 200),
        ("/nope", 404),
        ("/api/nope", 404),
        ("/api/boards?since=nope", 400),
    ]:
        status, headers, _ = _request(server, path)
        assert status == want, path
        _assert_hardened(headers)
    status, headers, _ = _request(server, "/api/boards", method="POST")
    assert status == 405
    _assert_hardened(headers)
    # the base class's own error pages (an unknown method, a header line too long) get them too
    host, port = server.rsplit(":", 1)
    for request, code in [
        (b"BREW /" + SCRIPT.encode() + b" HTTP/1.1\r\n\r\n", b"501"),
        (b"GET / HTTP/1.1\r\nX: " + b"y" * 70000 + b"\r\n\r\n", b"431"),
    ]:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(request)
            raw = b""
            while chunk := s.recv(65536):
                raw += chunk
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 " + code) and b"Content-Security-Policy: default-src 'none'" in head
        assert b"X-Content-Type-Options: nosniff" in head and b"<script" not in body


def test_a_request_body_is_never_read(server):
    """No route reads a body, so a huge or malformed Content-Length costs nothing: an answer at once, then
    the connection closes (HTTP/1.0), so unread bytes are never taken for a request."""
    host, port = server.rsplit(":", 1)
    for method, length, code in [
        ("POST", str(256 * 2**20), b"405"),
        ("POST", "-1", b"405"),
        ("GET", "-1", b"200"),
        ("GET", str(256 * 2**20), b"200"),
    ]:
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(f"{method} /api/boards HTTP/1.1\r\nContent-Length: {length}\r\n\r\n".encode())
            raw = b""
            while chunk := s.recv(65536):  # ends when the server closes: it waited on no body
                raw += chunk
        assert raw.startswith(b"HTTP/1.0 " + code), (method, length, raw[:80])


def test_an_id_past_sqlites_integers_is_a_404(server):
    for digits in ["9" * 23, "1" + "0" * 19, "9223372036854775808", "7" * 5000]:
        for prefix, ctype in [("/submissions/", "text/html"), ("/api/submissions/", "application/json")]:
            status, headers, _ = _request(server, prefix + digits)  # was: OverflowError, connection dropped
            assert (status, headers.get_content_type()) == (404, ctype), digits
    assert _request(server, "/submissions/0000000000000000000000001")[0] == 200  # leading zeros: still id 1


MALFORMED = [
    "/%",
    "/%ZZ",
    "/%00",
    "/?%=%&&=&since=%",
    "/?since=0001-01-01T00:00%2B14:00",
    "/api/boards?until=99999-01-01",
    "/submissions/-1",
    "/submissions/1e5",
    "/submissions/%D9%A1",
    "/api/boards/" + "a" * 65,
    "/api/boards/%FF",
    "//",
    "/..%2F..%2Fetc%2Fpasswd",
    "/?" + "&".join(f"k{i}=v" for i in range(2000)),
    "/api/submissions/%20",
]


def test_malformed_paths_and_queries_get_an_answer(server):
    for path in MALFORMED:
        status, headers, body = _request(server, path)  # a dropped connection raises here
        assert status in (200, 400, 404), (path, status, body)
        _assert_hardened(headers)


def test_an_unexpected_fault_is_a_logged_escaped_500(tmp_path, caplog):
    """A store that became unreadable while serving (here: overwritten with garbage) is a 500 with an
    escaped reason, logged; the reason quotes the store's path, which holds markup."""
    where = tmp_path / "<img src=x onerror=alert(1)>"
    srv, base = serve_in_thread(where / "lb.sqlite")
    try:
        for extra in where.glob("lb.sqlite-*"):
            extra.unlink()
        (where / "lb.sqlite").write_bytes(b"not a database, not at all" * 100)
        netloc = urlparse(base).netloc
        with caplog.at_level(logging.ERROR, logger="argym.leaderboards.server"):
            status, headers, body = _request(netloc, "/")
            assert status == 500 and headers.get_content_type() == "text/html"
            assert (
                "StoreError" in body and "&lt;img src=x onerror=alert(1)&gt;" in body and "<img" not in body
            )
            _assert_hardened(headers)
            status, headers, body = _request(netloc, "/api/boards")
            assert status == 500 and "not a usable argym leaderboard" in json.loads(body)["error"]
        assert sum("board server: GET" in r.getMessage() for r in caplog.records) == 2
    finally:
        srv.shutdown()
        srv.server_close()
