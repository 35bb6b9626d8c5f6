"""`argym board serve`: a small, read-only web server over the store (standard library only).

    GET /                       the boards (HTML)
    GET /submissions/{id}       one submission: provenance and per-episode results (HTML)
    GET /api/boards             every board with its ranked rows (JSON)
    GET /api/boards/{key}       one board (a key prefix is enough) (JSON)
    GET /api/submissions/{id}   one submission with its episodes (JSON)

Every request opens the store afresh, so new submissions show on reload. There
are no write routes: submissions go through `argym eval --submit` or
`argym.leaderboards.submit`, which validate. Binds 127.0.0.1 by default.

Hostile requests: whatever of the request a response repeats is HTML-escaped;
every response (errors included) carries a Content-Security-Policy that allows
no script, plugin, frame or outside resource, and ``X-Content-Type-Options:
nosniff``, so a reflected string cannot run even if one slipped through. A
request no route can serve gets a 404 or 400; an unexpected fault gets a 500
with an escaped one-line reason and is logged, never a dropped connection.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from argym.leaderboards import boards as load_boards
from argym.leaderboards.render import boards_html, submission_page
from argym.leaderboards.store import Store

log = logging.getLogger(__name__)

# The pages need inline CSS (a <style> block and style attributes) and nothing else: no script, no
# outside resource; forms submit only to this server.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
MAX_ID = 2**63 - 1  # SQLite's largest INTEGER: a longer id names no submission


class _Handler(BaseHTTPRequestHandler):
    db: Path
    server_version = "argym-board"
    _responded = False  # whether this request's response has started (a fault after it cannot become a 500)

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def end_headers(self) -> None:
        # Here rather than in `_send`, so that the base class's own error pages (bad request line, ...) get them too.
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def _send(self, status: int, body: str, ctype: str) -> None:
        data = body.encode("utf-8")
        self._responded = True
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, obj: Any, status: int = 200) -> None:
        self._send(status, json.dumps(obj, indent=1), "application/json")

    def _not_found(self, what: str, api: bool) -> None:
        if api:
            self._json({"error": f"no {what}"}, HTTPStatus.NOT_FOUND)
        else:
            self._send(
                HTTPStatus.NOT_FOUND,
                f"<!doctype html><title>not found</title><p>No {html.escape(what)}. "
                f'<a href="/">All boards</a></p>',
                "text/html",
            )

    def do_GET(self) -> None:
        """Route the request; an unexpected fault is logged and answered with a 500, never a dropped connection."""
        self._responded = False
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):  # the client went away: nobody to answer
            return
        except Exception as e:
            log.exception("board server: %s %r failed", self.command, self.path)
            if self._responded:  # a response already started: it cannot be replaced, only cut
                self.close_connection = True
                return
            reason = f"{type(e).__name__}: {e}".splitlines()[0][:500] if str(e) else type(e).__name__
            if urlparse(self.path).path.startswith("/api/"):
                self._json({"error": f"internal error: {reason}"}, HTTPStatus.INTERNAL_SERVER_ERROR)
            else:
                self._send(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    "<!doctype html><title>internal error</title>"
                    f"<p>Internal error: {html.escape(reason)}. See the server log.</p>",
                    "text/html",
                )

    def _route(self) -> None:
        url = urlparse(self.path)
        path = unquote(url.path).rstrip("/") or "/"
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        filters: dict[str, Any] = {
            "agent": q.get("agent"),
            "since": q.get("since"),
            "until": q.get("until"),
            "best_per_agent": q.get("best") in ("1", "true", "yes", "on"),
        }
        try:
            if path == "/":
                found = load_boards(db=self.db, env_id=q.get("env"), split=q.get("split"), **filters)
                page = boards_html(found, link=lambda r: f"/submissions/{r.id}", query=q)
                self._send(200, page, "text/html")
            elif path == "/api/boards":
                found = load_boards(db=self.db, env_id=q.get("env"), split=q.get("split"), **filters)
                self._json({"boards": [b.to_dict() for b in found]})
            elif m := re.fullmatch(r"/api/boards/([0-9a-f]{1,64})", path):
                found = load_boards(db=self.db, key=m.group(1), **filters)
                if len(found) == 1:
                    self._json(found[0].to_dict())
                elif not found:
                    self._not_found(f"board {m.group(1)}", True)
                else:
                    self._json(
                        {
                            "error": f"key prefix {m.group(1)} matches {len(found)} boards",
                            "keys": [b.key for b in found],
                        },
                        HTTPStatus.BAD_REQUEST,
                    )
            elif m := re.fullmatch(r"/(api/)?submissions/([0-9]+)", path):
                digits = m.group(2).lstrip("0") or "0"
                sub_id = int(digits) if len(digits) <= len(str(MAX_ID)) else MAX_ID + 1
                with Store(self.db) as store:
                    sub = store.submission(sub_id) if sub_id <= MAX_ID else None
                if sub is None:
                    self._not_found(f"submission {m.group(2)}", bool(m.group(1)))
                elif m.group(1):
                    self._json(sub)
                else:
                    self._send(200, submission_page(sub), "text/html")
            else:
                self._not_found(f"page {path}", path.startswith("/api/"))
        except ValueError as e:  # a bad filter (e.g. since=not-a-date)
            self._json({"error": str(e)}, HTTPStatus.BAD_REQUEST)

    do_HEAD = do_GET

    def _read_only(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = _read_only


def make_server(
    db: str | Path | None = None, host: str = "127.0.0.1", port: int = 8765
) -> ThreadingHTTPServer:
    """A server bound to `host:port` (port 0 picks a free one: see ``server.server_address``)."""
    with Store(db) as store:  # create or migrate the file once, up front
        path = store.path
    handler = type("Handler", (_Handler,), {"db": path})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def serve_in_thread(
    db: str | Path | None = None, host: str = "127.0.0.1", port: int = 0
) -> tuple[ThreadingHTTPServer, str]:
    """Start a server in a daemon thread; returns it and its base URL (tests, notebooks)."""
    server = make_server(db, host, port)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bound_host, bound_port = server.server_address[:2]
    return server, f"http://{bound_host!s}:{bound_port}"
