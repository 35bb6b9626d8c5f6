"""The submission store: one SQLite file, versioned schema, safe under concurrent writers.

Where: ``--db PATH`` (CLI) or ``db=`` (Python), else ``$ARGYM_LEADERBOARD``,
else ``$ARGYM_HOME/leaderboard.sqlite``, else
``$XDG_DATA_HOME/argym/leaderboard.sqlite`` (``~/.local/share/argym/``).

Concurrency: WAL journal (readers never block the writer), every write is one
``BEGIN IMMEDIATE`` transaction (a submission and all its episodes land
together or not at all), a busy timeout, and a retry with backoff when SQLite
still reports the database as locked.

Schema versions live in ``PRAGMA user_version``. An older file is migrated on
open, in one transaction, after a copy of it is kept beside it (``*.vN.bak``):
version 1 (argym's first layout: one ``submissions`` table with the whole
result as a JSON blob) is split into tables; version 2 gains the episodes'
transcripts; up to version 3 a board's key held the sampling settings, so one
task set had a board per ``max_new_tokens`` — version 4 re-keys those boards
(the sampling moves onto each row), merges the ones that meet, and keeps every
old key as an alias, so a saved link or ``--key`` still finds its board.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

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
ENV_VAR = "ARGYM_LEADERBOARD"
T = TypeVar("T")

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


def default_path() -> Path:
    """The store's documented location (see the module docstring)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    if os.environ.get("ARGYM_HOME"):
        return Path(os.environ["ARGYM_HOME"]).expanduser() / "leaderboard.sqlite"
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "argym" / "leaderboard.sqlite"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _retry(fn: Callable[[], T], attempts: int = 50) -> T:
    """Run `fn`, retrying with jittered backoff while SQLite says the database is locked or busy."""
    for i in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or i == attempts - 1:
                raise
            time.sleep(min(0.5, 0.01 * 2 ** min(i, 6)) * (0.5 + random.random()))
    raise AssertionError("unreachable")


class Store:
    """The leaderboard database. Use as a context manager, or call `close()`."""

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as e:
            raise StoreError(
                f"cannot open the leaderboard file {self.path} ({e}). Point --db or ${ENV_VAR} at another file."
            ) from e
        self._conn.row_factory = sqlite3.Row
        try:
            _retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA busy_timeout=30000")
            _retry(self._open_schema)
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise StoreError(
                f"{self.path} is not a usable argym leaderboard ({e}). Point --db or "
                f"${ENV_VAR} at another file, or move this one away."
            ) from e

    # ---- lifecycle ------------------------------------------------------------------
    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits, or none of it."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # ---- schema ---------------------------------------------------------------------
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _open_schema(self) -> None:
        version = self.schema_version()
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer argym (schema {version}; this argym reads up "
                f"to {SCHEMA_VERSION}). Upgrade argym: pip install -U argym."
            )
        backup = self.path.with_name(f"{self.path.name}.v{version}.bak")
        if version >= 1 and not backup.exists():  # SQLite's backup API: consistent even with a WAL
            with contextlib.closing(sqlite3.connect(backup)) as dst:
                self._conn.backup(dst)
        with self._write() as db:
            version = self.schema_version()  # another process may have done it meanwhile
            if version == 0:
                tables = db.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
                if tables:
                    raise StoreError(
                        f"{self.path} holds tables but no argym schema version; not touching it."
                    )
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

    # ---- writes ---------------------------------------------------------------------
    def submit(self, result: Any) -> dict[str, Any]:
        """Validate `result` and store it; returns ``{"id", "board", "label", "created"}``.

        Submitting the same result twice stores it once (``created`` is False the second time).
        """
        sub = result if isinstance(result, Submission) else validate(result)
        return _retry(lambda: self._insert(sub))

    def _insert(self, sub: Submission, submitted_at: str | None = None) -> dict[str, Any]:
        with self._write() as db:
            return _insert(db, sub, submitted_at or _now())

    # ---- reads ----------------------------------------------------------------------
    def boards(self) -> list[dict[str, Any]]:
        """Every board: ``{"key", "env_id", "split", "label", "spec", "kwargs", "submissions", "aliases"}``
        (``aliases``: the keys this board had under schema 3 or older)."""
        rows = self._conn.execute(
            "SELECT b.key, b.env_id, b.split, b.label, b.spec, b.kwargs, COUNT(s.id) AS submissions FROM boards b "
            "LEFT JOIN submissions s ON s.board_key = b.key GROUP BY b.key ORDER BY b.env_id, b.split, b.label"
        ).fetchall()
        aliases: dict[str, list[str]] = {}
        for old, new in self._conn.execute("SELECT old_key, key FROM board_aliases ORDER BY old_key"):
            aliases.setdefault(new, []).append(old)
        return [
            {
                **dict(r),
                "spec": json.loads(r["spec"]),
                "kwargs": json.loads(r["kwargs"]),
                "aliases": aliases.get(r["key"], []),
            }
            for r in rows
        ]

    def rows(self, board_key: str) -> list[dict[str, Any]]:
        """The submissions of one board, unranked, without episodes."""
        cur = self._conn.execute("SELECT * FROM submissions WHERE board_key = ? ORDER BY id", (board_key,))
        return [_row(r) for r in cur.fetchall()]

    def submission(self, sub_id: int) -> dict[str, Any] | None:
        """One submission with its provenance and every episode, or None."""
        r = self._conn.execute("SELECT * FROM submissions WHERE id = ?", (int(sub_id),)).fetchone()
        if r is None:
            return None
        out = _row(r)
        eps = self._conn.execute(
            "SELECT task_id, sample, success, reward, turns, tokens, infra_failure, transcript "
            "FROM episodes WHERE submission_id = ? ORDER BY idx",
            (int(sub_id),),
        ).fetchall()
        out["episodes"] = [
            {
                **dict(e),
                "success": bool(e["success"]),
                "infra_failure": bool(e["infra_failure"]),
                "transcript": json.loads(e["transcript"]) if e["transcript"] else None,
            }
            for e in eps
        ]
        return out

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM submissions").fetchone()[0])


def _run_script(db: sqlite3.Connection, script: str) -> None:
    for stmt in script.split(";"):
        if stmt.strip():
            db.execute(stmt)


def _insert(db: sqlite3.Connection, sub: Submission, submitted_at: str) -> dict[str, Any]:
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


def _row(r: sqlite3.Row) -> dict[str, Any]:
    d = dict(r)
    prov = json.loads(d.pop("provenance"))
    d.pop("uid", None)
    d["pass_at_k"] = prov.get("pass_at_k", {})
    d["samples_per_task"] = prov["board"]["samples_per_task"]
    d["agent_info"] = prov.get("agent_info", {})
    d["training_run"] = prov.get("training_run", {})
    d["board"] = prov["board"]
    d["env_kwargs"] = prov.get("env_kwargs", prov["board"]["env_kwargs"])
    d["task_hash"] = prov.get("task_hash", "")
    d["sampling"] = prov.get("sampling", {})
    return d


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
        _insert(db, sub, r["created"])
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
