"""The submission store: one SQLite file, versioned schema, safe under concurrent writers.

Where: ``--db PATH`` (CLI) or ``db=`` (Python), else ``$ARGYM_LEADERBOARD``,
else ``$ARGYM_HOME/leaderboard.sqlite``, else
``$XDG_DATA_HOME/argym/leaderboard.sqlite`` (``~/.local/share/argym/``).

Concurrency: WAL journal (readers never block the writer), every write is one
``BEGIN IMMEDIATE`` transaction (a submission and all its episodes land
together or not at all), a busy timeout, and a retry with backoff when SQLite
still reports the database as locked.

An older file is migrated on open, in one transaction, after a copy of it is
kept beside it (``*.vN.bak``); the tables of each schema version and the
migrations between them are in leaderboards/schema.py.
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

from argym.leaderboards.schema import SCHEMA_VERSION, StoreError, insert, upgrade
from argym.leaderboards.submission import Submission, validate

ENV_VAR = "ARGYM_LEADERBOARD"
T = TypeVar("T")


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
            upgrade(db, version)

    # ---- writes ---------------------------------------------------------------------
    def submit(self, result: Any) -> dict[str, Any]:
        """Validate `result` and store it; returns ``{"id", "board", "label", "created"}``.

        Submitting the same result twice stores it once (``created`` is False the second time).
        """
        sub = result if isinstance(result, Submission) else validate(result)
        return _retry(lambda: self._insert(sub))

    def _insert(self, sub: Submission, submitted_at: str | None = None) -> dict[str, Any]:
        with self._write() as db:
            return insert(db, sub, submitted_at or _now())

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
