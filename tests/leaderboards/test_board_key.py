"""One task set, one board: the quickstart's own evaluation (its rollouts' `max_new_tokens`) and the README's
`argym eval ... --submit` of the same tasks meet on one board (issue 44, item 5); a schema-3 store, which keyed
boards by sampling too, is re-keyed on open and its old keys still find their board."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import argym.leaderboards as lb
from argym.leaderboards.schema import SCHEMA_V2, SCHEMA_V3, SCHEMA_VERSION
from argym.leaderboards.store import Store
from argym.leaderboards.submission import canonical, validate


def _trainer_style_result(episodes: int) -> dict:
    """`Trainer.evaluate` with the quickstart's config: its env kwargs, greedy, the rollouts' max_new_tokens."""
    from argym.agents.evaluate import evaluate
    from argym.agents.policy import SamplingParams
    from argym.algorithms.config import load_config

    cfg = load_config(None, [])
    sampling = SamplingParams(temperature=cfg.eval.temperature, max_new_tokens=cfg.rollout.max_new_tokens)
    result = evaluate(
        cfg.env.id,
        cfg.env.kwargs,
        "oracle",
        split="test",
        episodes=episodes,
        seed=cfg.seed,
        sampling=sampling,
    )
    return result.to_dict()


def test_the_quickstart_and_the_readme_eval_meet_on_one_board(lb_db, tmp_path):
    quick = _trainer_style_result(episodes=3)
    assert quick["sampling"]["max_new_tokens"] != 64  # the two paths do decode differently
    lb.submit(quick)
    env = {"PATH": "/usr/bin:/bin", "ARGYM_LEADERBOARD": str(lb_db), "HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "argym.cli", "eval", "argym/Math-v0", "--agent", "oracle", "--episodes", "5"]
    out = subprocess.run(
        [*cmd, "--seed", "0", "--submit"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    [board] = lb.boards("argym/Math-v0")
    assert [r.n for r in board.rows] == [5, 3]  # both rows, ranked together (same score: more episodes first)
    assert {r.sampling["max_new_tokens"] for r in board.rows} == {quick["sampling"]["max_new_tokens"], 64}
    assert "T=" not in board.label and {r.display_sampling for r in board.rows} == {
        f"T=0 max={quick['sampling']['max_new_tokens']}",
        "T=0 max=64",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "argym.cli", "board"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert shown.stdout.count("board ") == 1 and "max=64" in shown.stdout, shown.stdout


def _old_style(result: dict) -> tuple[str, str, str, dict]:
    """A result as schema 3 stored it: sampling inside the board spec (and so in the key and content hash)."""
    from argym.leaderboards.submission import board_key, submission_uid

    sub = validate(result)
    prov = sub.provenance()
    prov["board"]["sampling"] = prov.pop("sampling")
    return board_key(prov["board"]), submission_uid(prov, sub.episodes), sub.key.label(), prov


def test_a_schema_3_store_is_rekeyed_merged_and_its_old_keys_still_work(lb_db, result):
    short, long_ = result([True, False, True]), result([True] * 4, agent="other")
    long_["sampling"] = {**short["sampling"], "max_new_tokens": 16}
    attempts = result([False, True], env_kwargs={"max_attempts": 2})
    conn = sqlite3.connect(lb_db)
    for stmt in SCHEMA_V2.split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute(SCHEMA_V3)
    old_keys = []
    for r in (short, long_, attempts):
        key, uid, label, prov = _old_style(r)
        old_keys.append(key)
        spec = prov["board"]
        conn.execute(
            "INSERT OR IGNORE INTO boards VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                spec["env_id"],
                spec["split"],
                f"{label} | T=0.0",
                canonical(spec),
                canonical(spec["env_kwargs"]),
            ),
        )
        cur = conn.execute(
            "INSERT INTO submissions (uid, board_key, submitted_at, agent, score, ci_low, ci_high, confidence, "
            "mean_reward, n, n_tasks, infra_failures, seed, argym_version, provenance) "
            "VALUES (?, ?, '2026-11-01T00:00:00+00:00', ?, ?, ?, ?, 0.95, ?, ?, ?, 0, 0, ?, ?)",
            (uid, key, r["agent"], r["mean"], r["ci_low"], r["ci_high"], r["mean"], r["n"], r["n_tasks"],
             r["argym_version"], canonical(prov)),
        )  # fmt: skip
        conn.executemany(
            "INSERT INTO episodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            [
                (cur.lastrowid, i, e["task_id"], 0, int(e["success"]), e["reward"], 1, 7, 0)
                for i, e in enumerate(r["episodes"])
            ],
        )
    conn.execute("PRAGMA user_version=3")
    conn.commit()
    conn.close()
    assert len(set(old_keys)) == 3  # schema 3: a board per max_new_tokens

    with Store(lb_db) as store:
        assert store.schema_version() == SCHEMA_VERSION and store.count() == 3
    backup = sqlite3.connect(lb_db.with_name(lb_db.name + ".v3.bak"))
    assert backup.execute("SELECT COUNT(*) FROM boards").fetchone()[0] == 3
    backup.close()
    found = lb.boards("argym/Math-v0")
    assert len(found) == 2
    [merged] = [b for b in found if len(b.rows) == 2]
    assert [r.agent for r in merged.rows] == ["other", "scripted"] and "T=" not in merged.label
    assert [r.sampling["max_new_tokens"] for r in merged.rows] == [16, 64]
    assert sorted(merged.aliases) == sorted(old_keys[:2])
    for old in old_keys[:2]:  # a saved --key or /api/boards/{key} still finds the board
        assert [b.key for b in lb.boards(key=old[:8])] == [merged.key]
    assert merged.key == validate(short).key.key  # the key new submissions get
    assert lb.submit(short)["created"] is False and lb.submit(long_)["created"] is False  # stored once
    assert lb.submit(result([True], agent="new"))["board"] == merged.key
    sub = lb.submission(merged.rows[0].id)
    assert sub is not None and sub["sampling"]["max_new_tokens"] == 16
    assert json.loads(json.dumps(merged.to_dict()))["aliases"] == merged.aliases
