"""The small shared helpers: did-you-mean, key=value pairs, atomic writes."""

from __future__ import annotations

import pytest

from argym.errors import ConfigError, did_you_mean
from argym.files import write_atomic
from argym.values import parse_pair


def test_did_you_mean_names_close_choices_only():
    assert did_you_mean("max_attempt", ["max_attempts", "tasks"]) == " Did you mean: max_attempts?"
    assert did_you_mean("zzz", ["max_attempts", "tasks"]) == ""


@pytest.mark.parametrize(
    "text, dotted, expected",
    [
        ("digits=2", False, ("digits", 2)),
        ("algorithm.lr=1e-4", True, ("algorithm.lr", 1e-4)),
        ("a= x ", False, ("a", "x")),
    ],
)
def test_parse_pair_reads_keys_and_values(text, dotted, expected):
    assert parse_pair(text, dotted=dotted) == expected


@pytest.mark.parametrize("text", ["novalue", "=3", "a.b=1", "two words=1", "path/to/x=1"])
def test_parse_pair_refuses_what_is_not_key_value(text):
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_pair(text)


def test_write_atomic_replaces_whole_files_and_leaves_no_temp(tmp_path):
    path = tmp_path / "sub" / "result.json"
    write_atomic(path, "one")
    write_atomic(path, b"two")
    assert path.read_text() == "two"
    write_atomic(path, lambda tmp: tmp.write_text("three"))
    assert path.read_text() == "three"

    def broken(tmp):
        tmp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        write_atomic(path, broken)
    assert path.read_text() == "three"  # a failed write never leaves half a file in place
    assert sorted(p.name for p in path.parent.iterdir()) == ["result.json"]
