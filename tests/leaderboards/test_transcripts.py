"""Transcripts on the board: stored with each episode, bounded, shown on the submission page and in the API."""

from __future__ import annotations

import json
import urllib.request

import argym.leaderboards as lb
from argym.leaderboards.server import serve_in_thread
from argym.leaderboards.store import Store
from argym.transcript import HEAD_CHARS, TAIL_CHARS


def test_transcripts_reach_the_page_and_the_api_cut_to_size(result, lb_db):
    r = result([True, False])
    r["episodes"][0]["transcript"] = {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "<b>5</b>" * 5000},
        ],
        "verdict": {"parsed": "5", "correct": False},
    }
    sub_id = lb.submit(r)["id"]
    srv, base = serve_in_thread(lb_db)
    try:
        api = json.load(urllib.request.urlopen(f"{base}/api/submissions/{sub_id}", timeout=10))
        page = urllib.request.urlopen(f"{base}/submissions/{sub_id}", timeout=10).read().decode()
    finally:
        srv.shutdown()
        srv.server_close()
    t = api["episodes"][0]["transcript"]
    assert t["verdict"] == {"parsed": "5", "correct": False}
    assert (
        "chars cut" in t["messages"][1]["content"]
        and len(t["messages"][1]["content"]) < HEAD_CHARS + TAIL_CHARS + 64
    )
    assert api["episodes"][1]["transcript"] is None
    assert (
        "Transcripts" in page
        and "What is 2+2?" in page
        and "&lt;b&gt;5&lt;/b&gt;" in page
        and "<b>5</b>" not in page
    )


def test_a_result_without_transcripts_keeps_its_content_hash(result, lb_db):
    r = result([True, False])
    first = lb.submit(r)
    r2 = json.loads(json.dumps(r))
    for e in r2["episodes"]:
        e["transcript"] = None
    assert lb.submit(r2) == {**first, "created": False}


def test_a_schema_2_file_gains_the_transcript_column(result, lb_db):
    import sqlite3

    from argym.leaderboards.schema import SCHEMA_V2

    db = sqlite3.connect(lb_db)
    for stmt in SCHEMA_V2.split(";"):
        if stmt.strip():
            db.execute(stmt)
    db.execute("PRAGMA user_version=2")
    db.commit()
    db.close()
    with Store(lb_db) as store:
        assert store.schema_version() == 4  # SCHEMA_VERSION
        sub_id = store.submit(result([True]))["id"]
        assert store.submission(sub_id)["episodes"][0]["transcript"] is None
