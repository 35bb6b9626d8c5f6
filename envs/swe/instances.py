"""SWE-bench instances: the record, the JSONL reader, and the instances argym ships.

An instance has SWE-bench's fields (`swebench.types.SWEbenchInstance`):
``instance_id, repo, base_commit, problem_statement, patch, test_patch,
FAIL_TO_PASS, PASS_TO_PASS, version, environment_setup_commit`` (the two test
lists as JSON lists or JSON strings of lists, as in the SWE-bench datasets).
argym reads a few optional extras: ``split``; ``sdist`` (a source archive in
`DATA_DIR` that holds the repository, for synthesised instances);
``image`` and ``eval_script`` (SWE-bench v5 instances, whose repository is
the image's ``/testbed``); ``test_cmd`` (the test command, default pytest on
the listed tests); ``mutated`` (the function a synthesised instance changed).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from argym.envs.tasks import ListSource, jsonl_rows, split_of
from argym.errors import ConfigError
from argym.types import Task

DATA_DIR = Path(__file__).parent / "data"
SHIPPED = DATA_DIR / "instances.jsonl"
REQUIRED = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)


@dataclass(frozen=True)
class Instance:
    """One SWE-bench-format task (see the module docstring for the fields)."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str
    test_patch: str
    FAIL_TO_PASS: tuple[str, ...]
    PASS_TO_PASS: tuple[str, ...]
    version: str = ""
    environment_setup_commit: str = ""
    hints_text: str = ""
    created_at: str = ""
    split: str = ""
    sdist: str = ""
    image: str = ""
    eval_script: str = ""
    test_cmd: str = ""
    mutated: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_row(cls, row: dict[str, Any], where: str = "instance") -> Instance:
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: an instance must be a JSON object, got {type(row).__name__}.")
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise ConfigError(f"{where}: missing SWE-bench field(s) {missing}.")
        known = {f.name for f in fields(cls)} - {"extra"}
        kw = {k: v for k, v in row.items() if k in known}
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            value = kw[key]
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise ConfigError(f"{where}: {key} is not a JSON list.") from None
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise ConfigError(f"{where}: {key} must be a list of test names.")
            kw[key] = tuple(value)
        if not kw["FAIL_TO_PASS"]:
            raise ConfigError(f"{where}: FAIL_TO_PASS is empty; nothing would tell a fix from no fix.")
        for key, value in kw.items():
            if key not in ("FAIL_TO_PASS", "PASS_TO_PASS") and not isinstance(value, str):
                raise ConfigError(f"{where}: {key} must be a string, got {type(value).__name__}.")
        if not (kw.get("sdist") or kw.get("image")):
            raise ConfigError(
                f"{where}: the instance names no repository source: give `sdist` (an archive in "
                f"{DATA_DIR}) or `image` (a Docker image with the repository at /testbed)."
            )
        return cls(**kw, extra={k: v for k, v in row.items() if k not in known})

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row.pop("extra")
        row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = list(self.FAIL_TO_PASS), list(self.PASS_TO_PASS)
        return {k: v for k, v in row.items() if v != "" or k in REQUIRED}

    def to_task(self) -> Task:
        split = self.split or split_of(self.instance_id)
        return Task(
            id=self.instance_id,
            prompt=({"role": "user", "content": self.problem_statement},),
            split=split,
            answer=self.patch,
            meta={"instance": self.to_row()},
        )


def read_instances(path: str | Path) -> list[Instance]:
    """Every instance of a JSONL file; errors name the file and line."""
    return [Instance.from_row(row, f"{path}:{n}") for n, row in jsonl_rows(path, "instance")]


def write_instances(path: str | Path, instances: list[Instance]) -> None:
    Path(path).write_text(
        "".join(json.dumps(i.to_row(), sort_keys=True) + "\n" for i in instances), encoding="utf-8"
    )


def instance_of(task: Task) -> Instance:
    row = task.meta.get("instance")
    if row is None:
        raise ConfigError(f"Task {task.id!r} is not a SWE instance (no meta['instance']).")
    return Instance.from_row(row, task.id)


def swe_tasks(tasks: Any = None) -> ListSource:
    """The `tasks=` kwarg of SWE-v0: None/"shipped" for argym's instances, or a JSONL path."""
    if tasks is None or tasks == "shipped":
        path = SHIPPED
    elif isinstance(tasks, (str, Path)):
        path = Path(tasks)
    elif isinstance(tasks, (list, tuple)) and all(isinstance(t, Task) for t in tasks):
        return ListSource(list(tasks), name="tasks")
    else:
        raise ConfigError(
            f"tasks= must be 'shipped', a JSONL path of SWE-bench instances or a list of Tasks; "
            f"got {tasks!r}."
        )
    return ListSource([i.to_task() for i in read_instances(path)], name=str(path))
