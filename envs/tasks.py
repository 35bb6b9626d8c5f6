"""Task sources: where an env's tasks come from.

A source is an ordered, split-aware collection of `Task`s:
- `ListSource` holds a finite list (a JSONL file, packaged benchmark data);
- `ProceduralSource` generates tasks from an integer index with a seeded
  generator, so training has unlimited fresh data.

Train and test never share a task: a task's split is a function of its content
(a stable hash), or given explicitly by the file. Any task can be fetched by
id, whatever its split.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from argym.errors import ConfigError, TaskNotFoundError
from argym.types import Task
from argym.values import parse_pair

SPLITS = ("train", "test", "all")


def stable_hash(text: str) -> int:
    """A hash that does not change between processes (unlike `hash`)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def split_of(text: str, test_fraction: float = 0.1) -> str:
    """Assign content to train or test by its hash: deterministic and disjoint."""
    return "test" if (stable_hash(text) % 10_000) < test_fraction * 10_000 else "train"


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ConfigError(f"split must be one of {SPLITS}, got {split!r}.")
    return split


class TaskSource(ABC):
    """An ordered collection of tasks, split into train and test."""

    name: str = "tasks"

    @abstractmethod
    def get(self, task_id: str) -> Task:
        """The task with this id, whatever its split; `TaskNotFoundError` if none."""

    @abstractmethod
    def iter_split(self, split: str) -> Iterator[Task]:
        """The tasks of `split` in a fixed order (may be endless for procedural train)."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, split: str) -> Task:
        """One task of `split` drawn with `rng`."""

    def take(self, split: str, n: int | None) -> list[Task]:
        """The first `n` tasks of `split` in order (all of them if `n` is None)."""
        out: list[Task] = []
        for task in self.iter_split(split):
            if n is not None and len(out) >= n:
                break
            out.append(task)
        return out


class ListSource(TaskSource):
    """A finite list of tasks (JSONL files, packaged benchmark data)."""

    def __init__(self, tasks: Sequence[Task], name: str = "tasks"):
        self.name = name
        self.tasks = list(tasks)
        self._by_id: dict[str, Task] = {}
        for t in self.tasks:
            if t.id in self._by_id:
                raise ConfigError(f"Task source {name!r} has two tasks with id {t.id!r}; ids must be unique.")
            self._by_id[t.id] = t

    def get(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise TaskNotFoundError(
                f"No task with id {task_id!r} in {self.name!r} ({len(self.tasks)} tasks)."
            ) from None

    def iter_split(self, split: str) -> Iterator[Task]:
        check_split(split)
        return (t for t in self.tasks if split == "all" or t.split == split)

    def sample(self, rng: np.random.Generator, split: str) -> Task:
        pool = list(self.iter_split(split))
        if not pool:
            raise ConfigError(f"Task source {self.name!r} has no tasks in split {split!r}.")
        return pool[int(rng.integers(len(pool)))]


class ProceduralSource(TaskSource):
    """Tasks generated from an index by `make(index) -> Task`, split by content hash.

    `make` must be a pure function of the index. The test split is the first
    `test_size` generated tasks whose content hashes into test, so it is finite
    and the same on every machine; train draws random indices and skips any
    task whose content belongs to test.
    """

    _ID = re.compile(r"^(?P<name>.+)#(?P<index>\d+)$")

    def __init__(
        self,
        name: str,
        make: Callable[[int], Task],
        test_size: int = 500,
        test_fraction: float = 0.1,
        max_index: int = 2**40,
    ):
        self.name = name
        self._make = make
        self.test_size = test_size
        self.test_fraction = test_fraction
        self.max_index = max_index
        self._test: list[Task] | None = None

    def _build(self, index: int) -> Task:
        raw = self._make(index)
        return replace(raw, id=f"{self.name}#{index}", split=split_of(_content_key(raw), self.test_fraction))

    def get(self, task_id: str) -> Task:
        m = self._ID.match(task_id)
        if not m or m.group("name") != self.name:
            raise TaskNotFoundError(
                f"Task id {task_id!r} is not of source {self.name!r} (expected '{self.name}#<index>')."
            )
        return self._build(int(m.group("index")))

    def test_tasks(self) -> list[Task]:
        if self._test is None:
            out: list[Task] = []
            seen: set[str] = set()
            i = 0
            while len(out) < self.test_size and i < self.test_size * 1000:
                t = self._build(i)
                key = _content_key(t)
                if t.split == "test" and key not in seen:
                    seen.add(key)
                    out.append(t)
                i += 1
            if len(out) < self.test_size:
                raise ConfigError(
                    f"Source {self.name!r} yields only {len(out)} distinct test tasks; "
                    f"lower test_size or raise the difficulty."
                )
            self._test = out
        return self._test

    def iter_split(self, split: str) -> Iterator[Task]:
        check_split(split)
        if split == "test":
            return iter(self.test_tasks())
        return self._iter_train(include_test=split == "all")

    def _iter_train(self, include_test: bool) -> Iterator[Task]:
        i = 0
        while i < self.max_index:
            t = self._build(i)
            if include_test or t.split == "train":
                yield t
            i += 1

    def sample(self, rng: np.random.Generator, split: str) -> Task:
        check_split(split)
        if split == "test":
            tests = self.test_tasks()
            return tests[int(rng.integers(len(tests)))]
        for _ in range(10_000):
            t = self._build(int(rng.integers(self.max_index)))
            if split == "all" or t.split == "train":
                return t
        raise ConfigError(f"Source {self.name!r} could not draw a train task; is every task in test?")


def _content_key(task: Task) -> str:
    """What makes two tasks the same problem: the prompt text."""
    return "\n".join(str(m.get("content", "")) for m in task.prompt)


def parse_source_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Parse ``"name"`` or ``"name(key=value, ...)"`` into a name and kwargs.

    Values are read as YAML scalars, so ``digits=2`` is an int and ``ops=+-`` a string;
    text YAML cannot read as a scalar (``ops=*``, ``ops=-``) stays a string.
    """
    m = re.fullmatch(r"\s*([^()\s]+)\s*(?:\((.*)\))?\s*", spec)
    if not m:
        raise ConfigError(f"Cannot read task source {spec!r}; expected 'name' or 'name(key=value, ...)'.")
    name, args = m.group(1), m.group(2)
    kwargs: dict[str, Any] = {}
    if args and args.strip():
        for part in args.split(","):
            try:
                key, value = parse_pair(part, example="digits=2")
            except ConfigError as e:
                raise ConfigError(f"Task source {spec!r}: {e}") from None
            kwargs[key] = value
    return name, kwargs


def jsonl_rows(path: str | Path, item: str = "task") -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for every non-empty line of `path`; errors name the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{item.capitalize()} file {str(path)!r} does not exist.")
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ConfigError(f"{path}:{n}: cannot read {item}: not valid JSON ({e}).") from None
            yield n, row


def read_jsonl(path: str | Path, to_task: Callable[[dict[str, Any], int], Task]) -> ListSource:
    """Read a JSONL file into a `ListSource`, one task per non-empty line (see `rows_source`).

    `to_task(row, line_number)` builds the task. Errors name the file and the line.
    """
    return rows_source(
        ((f"{path}:{n}", n, row) for n, row in jsonl_rows(path)), to_task, name=str(path), what="Task file"
    )


SMALL_TEST_SPLIT = 5
"""Fewer hash-assigned test tasks than this is too few to score on: `rows_source` warns."""


def rows_source(
    rows: Iterable[tuple[str, int, Any]],
    to_task: Callable[[dict[str, Any], int], Task],
    name: str,
    what: str = "Task source",
) -> ListSource:
    """Rows ``(where, index, row)`` of a file or dataset as a `ListSource`.

    `to_task(row, index)` builds the task; rows without a `split` are assigned to train or test
    by a stable hash of their id (so about `test_fraction` of them are test). A small source
    whose hash split leaves the test split nearly empty gets a warning that suggests ``split=all``.
    """
    tasks, hashed = [], 0
    for where, n, row in rows:
        try:
            if not isinstance(row, dict):
                raise ValueError("each row must be a JSON object")
            task = to_task(row, n)
            split = check_split(str(row["split"])) if "split" in row else split_of(task.id)
        except (ValueError, KeyError, TypeError) as e:  # ConfigError (a bad split) is a ValueError
            raise ConfigError(f"{where}: cannot read task: {e}") from e
        hashed += "split" not in row
        tasks.append(replace(task, split=split))
    if not tasks:
        raise ConfigError(f"{what} {name!r} holds no tasks.")
    n_test = sum(t.split == "test" for t in tasks)
    if hashed and n_test < min(SMALL_TEST_SPLIT, len(tasks)):  # some tasks, but few of them test
        warnings.warn(
            f"{name}: the hash split puts only {n_test} of its {len(tasks)} tasks in the test split; "
            "evaluate on all of them with split=all (or give each row a 'split' field).",
            stacklevel=3,
        )
    return ListSource(tasks, name=name)
