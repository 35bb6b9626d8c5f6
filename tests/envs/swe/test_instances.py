"""The instance format and the shipped instances: SWE-bench fields, ≥60 instances from ≥3 projects, train and
test never share a mutated function, problem statements written from test output (not the diff), base
commits rebuilt exactly from the shipped sdists."""

from __future__ import annotations

import json

import pytest

from argym.envs.swe.instances import DATA_DIR, SHIPPED, Instance, read_instances, swe_tasks
from argym.envs.swe.project import base_repo, git
from argym.errors import ConfigError

FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
    "environment_setup_commit",
)


def test_shipped_instances_are_many_varied_and_split_by_function() -> None:
    instances = read_instances(SHIPPED)
    assert len(instances) >= 60
    assert len({i.repo for i in instances}) >= 3
    rows = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
    assert all(set(FIELDS) <= set(r) for r in rows)
    train = {i.mutated for i in instances if i.split == "train"}
    test = {i.mutated for i in instances if i.split == "test"}
    assert train and test and not train & test
    for repo in {i.repo for i in instances}:
        assert {i.split for i in instances if i.repo == repo} == {"train", "test"}
    assert all((DATA_DIR / i.sdist).is_file() for i in instances)
    assert len({i.instance_id for i in instances}) == len(instances)
    source = swe_tasks()
    assert len(list(source.iter_split("all"))) == len(instances)
    assert len(list(source.iter_split("test"))) + len(list(source.iter_split("train"))) == len(instances)


def test_problem_statements_come_from_the_failing_tests_not_the_diff() -> None:
    for i in read_instances(SHIPPED):
        assert "diff --git" not in i.problem_statement and i.FAIL_TO_PASS[0] in i.problem_statement
        added = [
            ln[1:].strip() for ln in i.patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")
        ]
        assert not any(len(a) > 20 and a in i.problem_statement for a in added), i.instance_id


@pytest.mark.parametrize("project", ["toolz", "boltons", "more_itertools"])
def test_base_commit_is_rebuilt_exactly_without_history(project: str) -> None:
    inst = next(i for i in read_instances(SHIPPED) if i.sdist.startswith(project))
    repo = base_repo(inst.sdist, inst.patch, inst.base_commit)  # raises if the commit id differs
    assert git(repo, "rev-list", "--all").split() == [inst.base_commit]
    assert git(repo, "tag").strip() == "" and git(repo, "remote").strip() == ""
    assert git(repo, "apply", "--check", "-", stdin=inst.patch.encode()) == ""  # the gold patch applies
    with pytest.raises(ConfigError, match="base_commit"):
        base_repo(inst.sdist, inst.patch, "0" * 40)


def _row(**over):
    row = {
        "instance_id": "x__y-1",
        "repo": "x/y",
        "base_commit": "abc",
        "problem_statement": "p",
        "patch": "",
        "test_patch": "",
        "FAIL_TO_PASS": '["t::a"]',
        "PASS_TO_PASS": "[]",
        "sdist": "toolz-1.2.0.tar.gz",
    }
    row.update(over)
    return {k: v for k, v in row.items() if v is not None}


def test_reader_accepts_swebench_rows_and_names_bad_lines(tmp_path) -> None:
    inst = Instance.from_row(_row())  # FAIL_TO_PASS as a JSON string, as in SWE-bench's datasets
    assert inst.FAIL_TO_PASS == ("t::a",) and inst.PASS_TO_PASS == ()
    assert Instance.from_row(_row(FAIL_TO_PASS=["t::b"])).FAIL_TO_PASS == ("t::b",)
    for bad, match in (
        (_row(patch=None), "missing SWE-bench field"),
        (_row(FAIL_TO_PASS="[oops"), "not a JSON list"),
        (_row(FAIL_TO_PASS="[]"), "FAIL_TO_PASS is empty"),
        (_row(sdist=None), "no repository source"),
        (_row(version=3), "version must be a string"),
    ):
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps(_row()) + "\n\n" + json.dumps(bad) + "\n")
        with pytest.raises(ConfigError, match=match) as e:
            read_instances(path)
        assert "bad.jsonl:3" in str(e.value)
    path.write_text("{not json\n")
    with pytest.raises(ConfigError, match="bad.jsonl:1: cannot read instance: not valid JSON"):
        read_instances(path)
    with pytest.raises(ConfigError, match="does not exist"):
        swe_tasks(str(tmp_path / "missing.jsonl"))


def test_a_source_that_is_not_an_sdist_is_a_clear_error(tmp_path) -> None:
    from argym.envs.swe.project import sdist_tree

    bad = tmp_path / "not.tar.gz"
    bad.write_text("hello")
    with pytest.raises(ConfigError, match="not a usable sdist archive"):
        sdist_tree(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        sdist_tree(tmp_path / "missing.tar.gz")
