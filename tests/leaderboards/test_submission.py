"""Bad submissions are refused with a clear message, and nothing of them is written."""

from __future__ import annotations

import math

import pytest

import argym.leaderboards as lb
from argym.leaderboards import store as store_mod
from argym.leaderboards.store import Store


def _nothing_written(path) -> None:
    with Store(path) as store:
        assert store.count() == 0 and store.boards() == []


def _set(path: str, value):
    def change(r):
        *parents, last = path.split(".")
        d = r
        for p in parents:
            d = d[int(p)] if isinstance(d, list) else d[p]
        if value is KeyError:
            del d[last]
        else:
            d[last] = value

    return change


BAD = [
    (
        "unknown env",
        _set("env_id", "argym/Mth-v0"),
        "Unknown env 'argym/Mth-v0'.*Did you mean: argym/Math-v0",
    ),
    ("mean not from episodes", _set("mean", 0.9), "'mean' is 0.9 but its episodes give 0.5"),
    ("interval not from episodes", _set("ci_low", 0.01), "'ci_low'.*does not match"),
    ("reward not from episodes", _set("mean_reward", 0.7), "'mean_reward'.*does not match"),
    ("episode count", _set("n", 11), "n=11"),
    ("episode flipped", _set("episodes.0.success", False), "'mean'.*does not match"),
    ("score above 1", _set("mean", 1.5), r"'mean' must be in \[0, 1\]"),
    ("score below 0", _set("ci_low", -0.1), r"'ci_low' must be in \[0, 1\]"),
    ("NaN score", _set("mean", math.nan), "'mean' must be a finite number"),
    ("NaN reward", _set("episodes.3.reward", math.inf), r"episodes\[3\]: 'reward' must be a finite number"),
    ("missing provenance", _set("task_hash", KeyError), "lacks provenance field.*task_hash"),
    ("missing graders", _set("grader_versions", KeyError), "grader_versions"),
    ("string for a number", _set("n", "10"), "'n' must be an integer, got '10'"),
    ("string score", _set("mean", "0.5"), "'mean' must be a number, got '0.5'"),
    ("bool for a number", _set("seed", True), "'seed' must be an integer"),
    ("episode lacks a field", _set("episodes.2.task_id", KeyError), r"episodes\[2\]: lacks task_id"),
    ("empty agent", _set("agent", " "), "'agent' must be a non-empty string"),
    ("pass@k that k=1 cannot give", _set("pass_at_k", {"pass@2": 0.5}), "cannot give"),
]


@pytest.mark.parametrize("name,change,message", BAD, ids=[b[0] for b in BAD])
def test_bad_submission_is_refused_and_nothing_written(name, change, message, result, lb_db):
    r = result([True, False] * 5)
    change(r)
    with pytest.raises(lb.SubmissionError, match=message):
        lb.submit(r)
    _nothing_written(lb_db)


def test_not_a_result_is_refused(lb_db):
    with pytest.raises(lb.SubmissionError, match="got list"):
        lb.submit([1, 2])
    _nothing_written(lb_db)


def test_a_failure_mid_write_leaves_nothing_partial(result, lb_db, monkeypatch):
    lb.submit(result([True] * 4, agent="first"))
    real = store_mod.insert  # the schema writer store.py calls inside its transaction

    def insert_then_crash(db, sub, at):  # board, submission and episode rows go in, then the write fails
        db.execute(
            "INSERT INTO boards (key, env_id, split, label, spec, kwargs) VALUES ('x', 'e', 's', 'l', '{}', '{}')"
        )
        real(db, sub, at)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store_mod, "insert", insert_then_crash)
    with pytest.raises(RuntimeError, match="disk on fire"):
        lb.submit(result([False] * 4, agent="second"))
    monkeypatch.setattr(store_mod, "insert", real)
    with Store(lb_db) as store:
        assert store.count() == 1 and "x" not in [b["key"] for b in store.boards()]
        assert store._conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == 4
    assert [r.agent for r in lb.board("argym/Math-v0")] == ["first"]
