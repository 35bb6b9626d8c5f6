"""Views: terminal table, static HTML (offline), PNG plot, the board server's pages and JSON API."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

import argym.leaderboards as lb
from argym.leaderboards.render import boards_html, print_boards, write_html, write_plot
from argym.leaderboards.server import serve_in_thread


@pytest.fixture
def two_boards(result):
    lb.submit(result([True] * 9 + [False], agent="hf:models/strong <b>"))
    lb.submit(result([True] * 6 + [False] * 4, agent="tiny:runs/quickstart"))
    lb.submit(result([True] * 3 + [False] * 7, agent="random", env_kwargs={"max_attempts": 2}))
    return lb.boards()


def test_terminal_table(two_boards):
    from rich.console import Console

    console = Console(record=True, width=100)
    print_boards(two_boards, console)
    text = console.export_text()
    assert "hf:models/strong <b>" in text and "[0.596, 0.982]" in text and "max_attempts=2" in text
    assert "1≈" not in text and "2≈" in text  # 0.6 [.31,.83] overlaps 0.9 [.60,.98]


def test_static_html_is_self_contained(two_boards, tmp_path):
    details = [lb.submission(r.id) for b in two_boards for r in b.rows]
    path = write_html(tmp_path / "board.html", two_boards, details)
    page = path.read_text()
    assert page.count('<tr class="') == 3 and page.count('class="detail"') == 3
    assert "hf:models/strong &lt;b&gt;" in page and '<b>"' not in page  # escaped
    assert 'href="#sub-1"' in page and 'id="sub-1"' in page and "task#9" in page
    # nothing loads from elsewhere: no URLs, scripts, stylesheets, images or fonts
    assert not re.search(r"https?://|<script|<link|<img|@import|url\(", page)


def test_png_plot(two_boards, tmp_path):
    path = write_plot(tmp_path / "board.png", two_boards)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_empty_store_renders(tmp_path):
    assert "No submissions yet" in boards_html([])
    assert write_plot(tmp_path / "empty.png", []).exists()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get_content_type(), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get_content_type(), e.read().decode()


def test_server_pages_and_json_api(two_boards, lb_db):
    server, base = serve_in_thread(lb_db)
    try:
        assert base.startswith("http://127.0.0.1:")
        status, ctype, body = _get(base + "/api/boards")
        assert (status, ctype) == (200, "application/json")
        boards = json.loads(body)["boards"]
        assert sorted(len(b["rows"]) for b in boards) == [1, 2]
        main = next(b for b in boards if len(b["rows"]) == 2)
        status, _, body = _get(f"{base}/api/boards/{main['key']}")
        assert status == 200 and [r["agent"] for r in json.loads(body)["rows"]] == [
            "hf:models/strong <b>",
            "tiny:runs/quickstart",
        ]
        assert _get(f"{base}/api/boards/{main['key'][:4]}")[0] == 200  # a key prefix is enough
        status, ctype, page = _get(base + "/")
        assert (status, ctype) == (200, "text/html") and 'href="/submissions/1"' in page
        status, _, page = _get(base + "/submissions/1")
        assert status == 200 and "task#0" in page and "0.9.0" in page
        status, _, body = _get(base + "/api/submissions/2")
        assert status == 200 and len(json.loads(body)["episodes"]) == 10
        assert _get(base + "/api/boards/ffffffffffff")[0] == 404
        assert _get(base + "/submissions/999")[0] == 404
        assert _get(base + "/api/boards?since=nope")[0] == 400
        # new submissions show without a restart; the API is read-only
        lb.submit(_result_like(boards))
        assert len(json.loads(_get(base + "/api/boards")[2])["boards"]) == 3
        req = urllib.request.Request(base + "/api/boards", data=b"{}", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 405
    finally:
        server.shutdown()
        server.server_close()


def _result_like(boards):
    from argym.stats import success_interval

    eps = [
        {
            "task_id": "q",
            "sample": 0,
            "success": True,
            "reward": 1.0,
            "turns": 1,
            "tokens": 1,
            "infra_failure": False,
        }
    ]
    m, lo, hi = success_interval([True], ["q"])
    return {
        "env_id": "argym/Math-v0",
        "env_kwargs": {"tasks": "x.jsonl"},
        "split": "all",
        "n": 1,
        "n_tasks": 1,
        "samples_per_task": 1,
        "mean": m,
        "ci_low": lo,
        "ci_high": hi,
        "mean_reward": 1.0,
        "infra_failures": 0,
        "seed": 0,
        "agent": "oracle",
        "sampling": {},
        "task_hash": "abc",
        "argym_version": "0.1.0",
        "grader_versions": {},
        "episodes": eps,
    }
