"""The leaderboard store's tables: each schema version, how a submission is written, and the migrations.

Schema versions live in ``PRAGMA user_version``; the store (leaderboards/store.py)
migrates an older file on open with `upgrade`, in one transaction, after keeping a
copy of it. Version 1 (argym's first layout: one ``submissions`` table with the
whole result as a JSON blob) is split into tables; version 2 gains the episodes'
transcripts; up to version 3 a board's key held the sampling settings, so one
task set had a board per ``max_new_tokens`` — version 4 re-keys those boards
(the sampling moves onto each row), merges the ones that meet, and keeps every
old key as an alias, so a saved link or ``--key`` still finds its board.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from argym.errors import ArgymError
from argym.leaderboards.submission import (
    Submission,
    SubmissionError,
    board_key,
    canonical,
    submission_uid,
    validate,
)

SCHEMA_VERSION = 4
# The first layout, kept verbatim so that files written by it can be migrated (and tested).
SCHEMA_V1 = """
CREATE TABLE submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    env_id TEXT NOT NULL, split TEXT NOT NULL, env_kwargs TEXT NOT NULL, agent TEXT NOT NULL,
    mean REAL NOT NULL, ci_low REAL NOT NULL, ci_high REAL NOT NULL, n INTEGER NOT NULL,
    created TEXT NOT NULL,
    result TEXT NOT NULL  -- the whole EvalResult.to_dict(), episodes included
);
"""

SCHEMA_V2 = """
CREATE TABLE boards (
    key TEXT PRIMARY KEY, env_id TEXT NOT NULL, split TEXT NOT NULL, label TEXT NOT NULL,
    spec TEXT NOT NULL,   -- canonical JSON of the board key's fields
    kwargs TEXT NOT NULL  -- JSON: the first submission's env kwargs with the env's defaults (for display, filters)
);
CREATE TABLE submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    uid TEXT NOT NULL UNIQUE,              -- content hash: the same result is stored once
    board_key TEXT NOT NULL REFERENCES boards(key),
    submitted_at TEXT NOT NULL,            -- UTC, ISO 8601
    agent TEXT NOT NULL, agent_kind TEXT, model TEXT, fingerprint TEXT,
    score REAL NOT NULL, ci_low REAL NOT NULL, ci_high REAL NOT NULL, confidence REAL NOT NULL,
    mean_reward REAL NOT NULL, n INTEGER NOT NULL, n_tasks INTEGER NOT NULL, infra_failures INTEGER NOT NULL,
    seed INTEGER NOT NULL, argym_version TEXT NOT NULL, git_commit TEXT, wall_s REAL,
    provenance TEXT NOT NULL               -- JSON: Submission.provenance()
);
CREATE INDEX submissions_board ON submissions(board_key, score DESC);
CREATE TABLE episodes (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL, task_id TEXT NOT NULL, sample INTEGER NOT NULL, success INTEGER NOT NULL,
    reward REAL NOT NULL, turns INTEGER NOT NULL, tokens INTEGER NOT NULL, infra_failure INTEGER NOT NULL,
    PRIMARY KEY (submission_id, idx)
);
"""


# Schema 2 → 3: each episode may keep its transcript (JSON, bounded by argym.transcript).
SCHEMA_V3 = "ALTER TABLE episodes ADD COLUMN transcript TEXT"

# Schema 3 → 4: boards are keyed without the sampling settings; an old key names its board still.
SCHEMA_V4 = "CREATE TABLE board_aliases (old_key TEXT PRIMARY KEY, key TEXT NOT NULL REFERENCES boards(key))"


class StoreError(ArgymError):
    """The store file cannot be used (newer schema, not a database, locked for too long)."""


def upgrade(db: sqlite3.Connection, version: int) -> None:
    """Bring a file at schema `version` (0: a new, empty one) to `SCHEMA_VERSION`, in the caller's transaction."""
    if version == 0:
        _run_script(db, SCHEMA_V2)
        db.execute(SCHEMA_V3)
        db.execute(SCHEMA_V4)
    elif version == 1:
        _migrate_v1(db)
    elif version in (2, 3):
        if version == 2:
            db.execute(SCHEMA_V3)
        db.execute(SCHEMA_V4)
        _rekey_without_sampling(db)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _run_script(db: sqlite3.Connection, script: str) -> None:
    for stmt in script.split(";"):
        if stmt.strip():
            db.execute(stmt)


def insert(db: sqlite3.Connection, sub: Submission, submitted_at: str) -> dict[str, Any]:
    """Write `sub` into the current layout, once (a result already stored, by its content hash, is not
    written again); returns ``{"id", "board", "label", "created"}``."""
    key = sub.key
    old = db.execute(
        "SELECT s.id, b.label FROM submissions s JOIN boards b ON b.key = s.board_key WHERE s.uid = ?",
        (sub.uid,),
    ).fetchone()
    if old is not None:  # the label as the board shows it (a board keeps the label it was created with)
        return {"id": int(old[0]), "board": key.key, "label": old[1], "created": False}
    db.execute(
        "INSERT OR IGNORE INTO boards (key, env_id, split, label, spec, kwargs) VALUES (?, ?, ?, ?, ?, ?)",
        (
            key.key,
            key.env_id,
            key.split,
            key.label(),
            canonical(key.spec()),
            canonical(key.display_kwargs or key.env_kwargs),
        ),
    )
    info = sub.agent_info
    cur = db.execute(
        "INSERT INTO submissions (uid, board_key, submitted_at, agent, agent_kind, model, fingerprint, score, "
        "ci_low, ci_high, confidence, mean_reward, n, n_tasks, infra_failures, seed, argym_version, git_commit, "
        "wall_s, provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sub.uid,
            key.key,
            submitted_at,
            sub.agent,
            info.get("kind"),
            info.get("model"),
            info.get("fingerprint"),
            sub.score,
            sub.ci_low,
            sub.ci_high,
            sub.confidence,
            sub.mean_reward,
            sub.n,
            sub.n_tasks,
            sub.infra_failures,
            sub.seed,
            sub.argym_version,
            sub.git_commit,
            sub.wall_s,
            canonical(sub.provenance()),
        ),
    )
    sub_id = cur.lastrowid
    assert sub_id is not None  # an INSERT sets it
    label = db.execute("SELECT label FROM boards WHERE key = ?", (key.key,)).fetchone()[0]
    db.executemany(
        "INSERT INTO episodes (submission_id, idx, task_id, sample, success, reward, turns, tokens, "
        "infra_failure, transcript) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                sub_id,
                i,
                e["task_id"],
                e["sample"],
                int(e["success"]),
                e["reward"],
                e["turns"],
                e["tokens"],
                int(e["infra_failure"]),
                canonical(e["transcript"]) if e.get("transcript") is not None else None,
            )
            for i, e in enumerate(sub.episodes)
        ],
    )
    return {"id": sub_id, "board": key.key, "label": label, "created": True}


def _migrate_v1(db: sqlite3.Connection) -> None:
    """Schema 1 → 3: split the JSON blob into boards, submissions and episodes.

    Version-1 results predate grader versions and agent provenance; those are
    filled with empty values (so a v1 row lands on its own board, not on one
    with results whose graders are known). Rows are re-validated; none is dropped.
    """
    old = db.execute("SELECT id, created, result FROM submissions ORDER BY id").fetchall()
    db.execute("ALTER TABLE submissions RENAME TO submissions_v1")
    _run_script(db, SCHEMA_V2)
    db.execute(SCHEMA_V3)
    db.execute(SCHEMA_V4)
    for r in old:
        result = json.loads(r["result"])
        result.setdefault("grader_versions", {})
        try:
            sub = validate(result, check_env=False)
        except SubmissionError as e:
            raise StoreError(
                f"cannot migrate version-1 submission {r['id']}: {e} The file is unchanged; "
                f"a copy is beside it (*.v1.bak)."
            ) from e
        insert(db, sub, r["created"])
    db.execute("DROP TABLE submissions_v1")


def _stored_episodes(db: sqlite3.Connection, sub_id: int) -> list[dict[str, Any]]:
    """A submission's episodes as `validate` built them (what its content hash covers)."""
    out = []
    for e in db.execute(
        "SELECT task_id, sample, success, reward, turns, tokens, infra_failure, transcript "
        "FROM episodes WHERE submission_id = ? ORDER BY idx",
        (sub_id,),
    ):
        episode = {
            "task_id": e["task_id"],
            "sample": e["sample"],
            "success": bool(e["success"]),
            "reward": float(e["reward"]),
            "turns": e["turns"],
            "tokens": e["tokens"],
            "infra_failure": bool(e["infra_failure"]),
        }
        if e["transcript"] is not None:
            episode["transcript"] = json.loads(e["transcript"])
        out.append(episode)
    return out


def _rekey_without_sampling(db: sqlite3.Connection) -> None:
    """Schema 3 → 4: a board's key leaves out the sampling settings, which move onto each submission.

    Boards that differed only in sampling merge (their rows rank together); each old key is kept in
    ``board_aliases``. A row's content hash is recomputed as `validate` now computes it, so resubmitting
    a result already on the board still stores nothing new.
    """
    boards = db.execute(
        "SELECT key, env_id, split, label, spec, kwargs FROM boards ORDER BY rowid"
    ).fetchall()
    for b in boards:
        spec = json.loads(b["spec"])
        if "sampling" not in spec:
            continue
        sampling = spec.pop("sampling")
        new = board_key(spec)
        parts = b["label"].split(" | ")
        label = " | ".join(parts[:-1] if len(parts) > 1 and parts[-1].startswith("T=") else parts)
        db.execute(
            "INSERT OR IGNORE INTO boards (key, env_id, split, label, spec, kwargs) VALUES (?, ?, ?, ?, ?, ?)",
            (new, b["env_id"], b["split"], label, canonical(spec), b["kwargs"]),
        )
        subs = db.execute(
            "SELECT id, provenance FROM submissions WHERE board_key = ?", (b["key"],)
        ).fetchall()
        for s in subs:
            prov = json.loads(s["provenance"])
            prov["board"] = spec
            prov.setdefault("sampling", sampling)
            uid = submission_uid(prov, _stored_episodes(db, s["id"]))
            db.execute(
                "UPDATE submissions SET board_key = ?, provenance = ?, uid = ? WHERE id = ?",
                (new, canonical(prov), uid, s["id"]),
            )
        if new != b["key"]:
            db.execute("UPDATE board_aliases SET key = ? WHERE key = ?", (new, b["key"]))
            db.execute("INSERT OR REPLACE INTO board_aliases (old_key, key) VALUES (?, ?)", (b["key"], new))
            db.execute("DELETE FROM boards WHERE key = ?", (b["key"],))
