"""Task sources: lists, procedural generators, JSONL files, source specs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import argym
from argym.envs.tasks import (
    ListSource,
    ProceduralSource,
    parse_source_spec,
    read_jsonl,
    split_of,
    stable_hash,
)


def toy_make(index: int) -> argym.Task:
    """1000 distinct questions, repeating: a pure function of the index."""
    return argym.Task(
        id="", prompt=({"role": "user", "content": f"q{index % 1000}"},), answer=str(index % 1000)
    )


def test_split_of_is_stable_and_roughly_a_tenth() -> None:
    assert stable_hash("abc") == stable_hash("abc") != stable_hash("abd")
    splits = [split_of(f"task {i}") for i in range(10_000)]
    assert splits == [split_of(f"task {i}") for i in range(10_000)]
    assert 0.08 < splits.count("test") / len(splits) < 0.12
    assert split_of("x", test_fraction=0.0) == "train" and split_of("x", test_fraction=1.0) == "test"


def test_list_source() -> None:
    tasks = [
        argym.Task(id=f"t{i}", prompt=({"role": "user", "content": str(i)},), split=s)
        for i, s in enumerate(["train", "test", "train"])
    ]
    src = ListSource(tasks, name="toy")
    assert [t.id for t in src.iter_split("train")] == ["t0", "t2"]
    assert [t.id for t in src.iter_split("all")] == ["t0", "t1", "t2"]
    assert src.get("t1") is tasks[1] and src.take("all", 2) == tasks[:2] and src.take("all", None) == tasks
    assert src.sample(np.random.default_rng(0), "test") is tasks[1]
    with pytest.raises(argym.TaskNotFoundError, match="t9"):
        src.get("t9")
    with pytest.raises(argym.ConfigError, match="two tasks with id"):
        ListSource(tasks + tasks[:1])
    with pytest.raises(argym.ConfigError, match="no tasks in split"):
        ListSource(tasks[:1]).sample(np.random.default_rng(0), "test")
    with pytest.raises(argym.ConfigError, match="split must be"):
        list(src.iter_split("validation"))


def test_procedural_source_splits_are_disjoint_and_stable() -> None:
    src = ProceduralSource("toy", toy_make, test_size=50)
    test = src.test_tasks()
    assert len(test) == 50 and len({t.prompt[0]["content"] for t in test}) == 50
    assert all(t.split == "test" for t in test) and test == src.take("test", None)
    assert [t.id for t in ProceduralSource("toy", toy_make, test_size=50).test_tasks()] == [
        t.id for t in test
    ]
    test_prompts = {t.prompt[0]["content"] for t in test}
    rng = np.random.default_rng(0)
    train = [src.sample(rng, "train") for _ in range(2000)]
    assert all(t.split == "train" and t.prompt[0]["content"] not in test_prompts for t in train)
    assert all(t.split == "train" for t in src.take("train", 100))


def test_procedural_ids_resolve_whatever_the_split() -> None:
    src = ProceduralSource("toy", toy_make, test_size=10)
    for task in src.test_tasks()[:3] + src.take("train", 3):
        assert src.get(task.id) == task
    assert src.get("toy#123456789").answer == "789"
    for bad in ("other#1", "toy#x", "toy"):
        with pytest.raises(argym.TaskNotFoundError):
            src.get(bad)


def test_procedural_source_with_too_few_test_tasks_says_so() -> None:
    tiny = ProceduralSource("tiny", lambda i: toy_make(i % 3), test_size=5)
    with pytest.raises(argym.ConfigError, match="distinct test tasks"):
        tiny.test_tasks()


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("arithmetic", ("arithmetic", {})),
        ("arithmetic()", ("arithmetic", {})),
        (" arithmetic(digits=3, ops=+-, terms=4) ", ("arithmetic", {"digits": 3, "ops": "+-", "terms": 4})),
        ("arithmetic(ops=*)", ("arithmetic", {"ops": "*"})),  # YAML would read an alias
        ("arithmetic(ops=-)", ("arithmetic", {"ops": "-"})),  # YAML would read a list
        ("arithmetic(ops=*+,x=)", ("arithmetic", {"ops": "*+", "x": ""})),
        (
            "reasoning_gym/chain_sum(min_terms=2,allow_negation=true,p=0.5)",
            ("reasoning_gym/chain_sum", {"min_terms": 2, "allow_negation": True, "p": 0.5}),
        ),
    ],
)
def test_parse_source_spec(spec: str, expected) -> None:
    assert parse_source_spec(spec) == expected


@pytest.mark.parametrize("spec", ["arithmetic(digits)", "a b", "arithmetic(digits=2"])
def test_parse_source_spec_errors(spec: str) -> None:
    with pytest.raises(argym.ConfigError):
        parse_source_spec(spec)


def test_read_jsonl(tmp_path) -> None:
    path = tmp_path / "qa.jsonl"
    rows = [{"q": "a", "split": "test"}, {"q": "b"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def to_task(row, line):
        return argym.Task(id=f"qa#{line}", prompt=({"role": "user", "content": row["q"]},))

    src = read_jsonl(path, to_task)
    assert src.get("qa#1").split == "test" and src.get("qa#2").split == split_of("qa#2")
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"nope": 1}) + "\n")
    with pytest.raises(argym.ConfigError, match=r"qa\.jsonl:2: cannot read task"):
        read_jsonl(path, to_task)
    path.write_text("\n\n")
    with pytest.raises(argym.ConfigError, match="holds no tasks"):
        read_jsonl(path, to_task)


def test_a_source_keeps_every_field_of_its_tasks(tmp_path) -> None:
    """A source sets a task's id and split and nothing else: a field a subclass adds survives (`dataclasses.replace`)."""

    @dataclasses.dataclass(frozen=True)
    class Tagged(argym.Task):
        tag: str = ""

    def make(index: int) -> Tagged:
        return Tagged(id="", prompt=({"role": "user", "content": f"q{index}"},), tag=f"tag{index}")

    task = ProceduralSource("tagged", make, test_size=2).get("tagged#7")
    assert isinstance(task, Tagged) and task.tag == "tag7" and task.id == "tagged#7"
    assert task.split == split_of("q7")
    path = tmp_path / "tagged.jsonl"
    path.write_text(json.dumps({"q": "a", "split": "test"}) + "\n")
    src = read_jsonl(path, lambda row, line: Tagged(id=f"t#{line}", prompt=(), tag=row["q"]))
    assert src.get("t#1") == Tagged(id="t#1", prompt=(), split="test", tag="a")
