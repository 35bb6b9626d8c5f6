"""Local leaderboards: store evaluation results with their provenance, rank them, show them.

    import argym.leaderboards as lb
    lb.submit(result)                          # an EvalResult or its .to_dict(); validated
    lb.board("argym/Math-v0", split="test")    # the ranked rows of that env's board
    lb.boards()                                # every board, ranked

docs/design.md, "Leaderboards". This package knows only argym's core: it stores
and ranks results, it runs nothing. The store's location is
`argym.leaderboards.store.default_path` (``$ARGYM_LEADERBOARD``, else
``$ARGYM_HOME/leaderboard.sqlite``, else ``~/.local/share/argym/leaderboard.sqlite``).
"""

from __future__ import annotations

import os
from typing import Any

from argym.errors import ConfigError
from argym.leaderboards.board import Board, Row, parse_date, rank
from argym.leaderboards.schema import SCHEMA_VERSION, StoreError
from argym.leaderboards.store import ENV_VAR, Store, default_path
from argym.leaderboards.submission import BoardKey, Submission, SubmissionError, validate

DB = str | os.PathLike[str] | None
_ABSENT = object()


def submit(result: Any, *, db: DB = None) -> dict[str, Any]:
    """Validate an evaluation result and store it: ``{"id", "board", "label", "created"}``.

    Raises `SubmissionError` (nothing is written) when the result is not a
    valid, self-consistent evaluation with its provenance.
    """
    with Store(db) as store:
        return store.submit(result)


def boards(
    env_id: str | None = None,
    split: str | None = None,
    *,
    db: DB = None,
    key: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    best_per_agent: bool = False,
    agent: str | None = None,
    since: Any = None,
    until: Any = None,
) -> list[Board]:
    """Every board, each with its ranked rows; optionally only those of one env, split, key prefix (a key
    the board had before the store was migrated finds it too), or whose env kwargs include `env_kwargs`
    (``{"max_attempts": 2}`` keeps the boards with max_attempts=2)."""
    since, until = parse_date(since, "since"), parse_date(until, "until")  # a bad date fails even on no rows
    with Store(db) as store:
        out = []
        for b in store.boards():
            if (
                (env_id and b["env_id"] != env_id)
                or (split and b["split"] != split)
                or (key and not any(k.startswith(key) for k in (b["key"], *b["aliases"])))
                or any(
                    b["kwargs"].get(k, _ABSENT) != v for k, v in (env_kwargs or {}).items() if k != "split"
                )
            ):
                continue
            rows = rank(
                store.rows(b["key"]), best_per_agent=best_per_agent, agent=agent, since=since, until=until
            )
            out.append(
                Board(
                    key=b["key"],
                    env_id=b["env_id"],
                    split=b["split"],
                    label=b["label"],
                    spec=b["spec"],
                    env_kwargs=b["kwargs"],
                    rows=rows,
                    aliases=b["aliases"],
                )
            )
        return out


def board(
    env_id: str,
    split: str = "test",
    *,
    db: DB = None,
    key: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    **filters: Any,
) -> list[Row]:
    """The ranked rows of `env_id`'s board on `split`.

    An env has one board per board key (env kwargs, task set, graders,
    samples per task, ...; not the sampling settings, which each row shows). When several match, narrow it with `env_kwargs=` (the
    boards whose kwargs include these) or a `key=` prefix (the error lists them). `filters`: ``best_per_agent``,
    ``agent``, ``since``, ``until``.
    """
    found = boards(env_id, split, db=db, key=key, env_kwargs=env_kwargs, **filters)
    if len(found) > 1:
        listing = "; ".join(f"{b.key}: {b.label}" for b in found)
        raise ConfigError(
            f"{len(found)} boards match {env_id!r} split {split!r}; pass key= or env_kwargs= "
            f"to pick one: {listing}"
        )
    return found[0].rows if found else []


def submission(sub_id: int, *, db: DB = None) -> dict[str, Any] | None:
    """One submission with its provenance and per-episode results."""
    with Store(db) as store:
        return store.submission(sub_id)


__all__ = [
    "ENV_VAR",
    "SCHEMA_VERSION",
    "Board",
    "BoardKey",
    "Row",
    "Store",
    "StoreError",
    "Submission",
    "SubmissionError",
    "board",
    "boards",
    "default_path",
    "submission",
    "submit",
    "validate",
]
