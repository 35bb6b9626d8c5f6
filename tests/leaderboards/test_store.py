"""The store and boards: round trip, board keys, ranking, filters, schema migration."""

from __future__ import annotations

import json
import sqlite3

import pytest

import argym.leaderboards as lb
from argym.errors import ConfigError
from argym.leaderboards.schema import SCHEMA_V1, SCHEMA_VERSION, StoreError
from argym.leaderboards.store import Store, default_path


def test_eval_submit_board_round_trip(lb_db):
    from argym.agents.evaluate import evaluate

    oracle = evaluate("argym/Math-v0", {}, "oracle", episodes=12)
    rand = evaluate("argym/Math-v0", {}, "random", episodes=12)
    assert oracle.grader_versions.get("math-verify") and oracle.git_commit is not None
    a, b = lb.submit(rand), lb.submit(oracle.to_dict())
    assert a["created"] and b["created"] and a["board"] == b["board"]
    rows = lb.board("argym/Math-v0", split="test")
    assert [r.agent for r in rows] == ["oracle", "random"]
    top = rows[0]
    assert (top.rank, top.id, top.n, top.n_tasks) == (1, b["id"], 12, 12)
    assert (top.score, top.ci_low, top.ci_high) == pytest.approx((oracle.mean, oracle.ci_low, oracle.ci_high))
    assert rows[1].score == pytest.approx(rand.mean) and not rows[1].overlaps_leader
    sub = lb.submission(top.id)
    assert len(sub["episodes"]) == 12 and all(e["success"] for e in sub["episodes"])
    assert sub["board"]["grader_versions"] == oracle.grader_versions
    # the same result again is not a second row
    assert lb.submit(oracle)["created"] is False
    assert len(lb.board("argym/Math-v0")) == 2


def test_same_tasks_spelled_differently_and_longer_runs_share_a_board():
    """The board's task set is the whole split by content; the env's defaults fill missing kwargs."""
    from argym.agents.evaluate import evaluate

    a = evaluate("argym/Math-v0", {}, "oracle", episodes=4)
    b = evaluate(
        "argym/Math-v0",
        {"tasks": "arithmetic(digits=2,ops=+,terms=2)", "max_attempts": 1},
        "random",
        episodes=7,
    )
    c = evaluate("argym/Math-v0", {"tasks": "arithmetic(digits=3,ops=+,terms=2)"}, "oracle", episodes=4)
    assert a.task_hash != b.task_hash and a.split_hash == b.split_hash != c.split_hash
    keys = [lb.submit(r)["board"] for r in (a, b, c)]
    assert keys[0] == keys[1] != keys[2]
    rows = lb.board("argym/Math-v0", key=keys[0])
    assert [(r.agent, r.n) for r in rows] == [("oracle", 4), ("random", 7)]
    assert lb.boards(key=keys[0])[0].env_kwargs == {
        "tasks": "arithmetic",
        "max_attempts": 1,
        "answer_format": "boxed",
    }
    assert len(lb.boards(env_kwargs={"tasks": "arithmetic(digits=3,ops=+,terms=2)"})) == 1


def test_answer_format_is_part_of_the_board_key():
    """Grading the final expression is another board than grading the box; the default is boxed."""
    from argym.agents.evaluate import evaluate

    results = [
        evaluate("argym/Math-v0", kwargs, "oracle", episodes=3)
        for kwargs in ({}, {"answer_format": "boxed"}, {"answer_format": "final"})
    ]
    keys = [lb.submit(r)["board"] for r in results]
    assert keys[0] == keys[1] != keys[2]
    assert lb.boards(key=keys[2])[0].env_kwargs["answer_format"] == "final"
    assert lb.boards(key=keys[0])[0].env_kwargs["answer_format"] == "boxed"


def test_different_env_kwargs_land_on_different_boards(result):
    lb.submit(result([True, False] * 5))
    lb.submit(result([True] * 10, env_kwargs={"max_attempts": 3}))
    lb.submit(result([True] * 10, split="train"))
    found = lb.boards("argym/Math-v0")
    assert len(found) == 3 and len({b.key for b in found}) == 3
    assert len(lb.boards("argym/Math-v0", split="test")) == 2
    with pytest.raises(ConfigError, match="2 boards match"):
        lb.board("argym/Math-v0", split="test")
    rows = lb.board("argym/Math-v0", split="test", env_kwargs={"max_attempts": 3})
    assert len(rows) == 1 and rows[0].score == 1.0
    # sampling settings and grader versions are part of the key too
    other = result([True] * 10)
    other["grader_versions"] = {"math-verify": "0.8.0"}
    assert lb.submit(other)["board"] != lb.submit(result([True] * 10))["board"]


def test_ranking_ties_overlap_best_per_agent_and_filters(result):
    lb.submit(result([True] * 8 + [False] * 2, agent="a"))  # 0.8, n=10
    lb.submit(result(([True] * 8 + [False] * 2) * 10, agent="b"))  # 0.8, n=100: narrower, ranks first
    lb.submit(result([True] * 2 + [False] * 98, agent="c"))  # far below
    lb.submit(result([True] * 1 + [False] * 9, agent="a", seed=1))  # a's worse run
    rows = lb.board("argym/Math-v0")
    assert [(r.agent, r.n) for r in rows] == [("b", 100), ("a", 10), ("a", 10), ("c", 100)]
    assert [r.rank for r in rows] == [1, 2, 3, 4]
    assert [r.overlaps_leader for r in rows] == [False, True, False, False]
    assert [r.agent for r in lb.board("argym/Math-v0", best_per_agent=True)] == ["b", "a", "c"]
    assert {r.agent for r in lb.board("argym/Math-v0", agent="A")} == {"a"}
    assert lb.board("argym/Math-v0", since="2999-01-01") == []
    assert len(lb.board("argym/Math-v0", until="2999-01-01")) == 4
    with pytest.raises(ConfigError, match="date"):
        lb.board("argym/Math-v0", since="yesterday")


def test_pass_at_k_submission(result):
    r = result([True, False, False, False, True, True, False, False], samples_per_task=4)
    r["pass_at_k"] = {"pass@1": 0.375, "pass@4": 1.0}  # tasks: 1 of 4 and 2 of 4 samples pass
    rows_key = lb.submit(r)
    row = lb.board("argym/Math-v0", key=rows_key["board"])[0]
    assert row.samples_per_task == 4 and row.pass_at_k["pass@4"] == pytest.approx(1.0)
    assert row.pass_at_k["pass@1"] == pytest.approx(0.375)


def test_default_path_honours_env_vars(monkeypatch, tmp_path, lb_db):
    assert default_path() == lb_db
    monkeypatch.delenv("ARGYM_LEADERBOARD")
    monkeypatch.setenv("ARGYM_HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / "leaderboard.sqlite"
    monkeypatch.delenv("ARGYM_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "argym" / "leaderboard.sqlite"


def test_version_1_file_is_migrated_not_lost(lb_db, result):
    old = [
        result([True] * 6 + [False] * 4, agent="old-a"),
        result([True] * 3 + [False] * 7, agent="old-b", env_kwargs={"max_attempts": 2}),
    ]
    for r in old:  # results from before grader versions and agent provenance
        for f in ("grader_versions", "agent_info", "training_run", "git_commit", "wall_s"):
            r.pop(f)
    conn = sqlite3.connect(lb_db)
    conn.executescript(SCHEMA_V1)
    for r in old:
        conn.execute(
            "INSERT INTO submissions (env_id, split, env_kwargs, agent, mean, ci_low, ci_high, n, created, "
            "result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                r["env_id"],
                r["split"],
                json.dumps(r["env_kwargs"]),
                r["agent"],
                r["mean"],
                r["ci_low"],
                r["ci_high"],
                r["n"],
                "2026-01-02T03:04:05+00:00",
                json.dumps(r),
            ),
        )
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()

    with Store(lb_db) as store:
        assert store.schema_version() == SCHEMA_VERSION and store.count() == 2
    backup = sqlite3.connect(lb_db.with_name(lb_db.name + ".v1.bak"))  # the untouched version-1 file
    assert backup.execute("PRAGMA user_version").fetchone()[0] == 1
    assert backup.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 2
    backup.close()
    found = lb.boards()
    assert sorted(r.agent for b in found for r in b.rows) == ["old-a", "old-b"]
    row = next(r for b in lb.boards() for r in b.rows if r.agent == "old-a")
    assert row.score == pytest.approx(0.6) and row.submitted_at.startswith("2026-01-02")
    assert len(lb.submission(row.id)["episodes"]) == 10
    lb.submit(result([True] * 10, agent="new"))  # a migrated file takes new submissions
    with Store(lb_db) as store:
        assert store.count() == 3


def test_newer_schema_and_foreign_files_are_refused(tmp_path):
    newer = tmp_path / "newer.sqlite"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer argym"):
        Store(newer)
    foreign = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE x (y)")
    conn.close()
    with pytest.raises(StoreError, match="no argym schema"):
        Store(foreign)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable"):
        Store(junk)
