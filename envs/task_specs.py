"""The `tasks=` kwarg every env takes, read into a `TaskSource`: a source or a list of tasks as they are, a
JSONL file or a Hugging Face dataset read by the env's row reader, or a spec ``name(key=value, ...)`` that
the env family's registry of sources builds (`named_source`)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argym.envs.hf_datasets import hf_source
from argym.envs.tasks import ListSource, TaskSource, parse_source_spec, read_jsonl
from argym.errors import ConfigError
from argym.registry import Registry, unknown_name
from argym.types import Task

SourceFactory = Callable[..., TaskSource]
"""A named task source's factory: ``(**kwargs) -> TaskSource``; ``(arg, **kwargs)`` for a spec ``name/arg``."""


def resolve_source(
    tasks: Any,
    *,
    row_to_task: Callable[[dict[str, Any], str], Task],
    named: Registry[SourceFactory] | Callable[[str, dict[str, Any]], TaskSource],
    kind: str,
) -> TaskSource:
    """The `tasks=` kwarg every env takes, as a task source.

    A `TaskSource` is used as is; a list of `Task` becomes a `ListSource`; a
    path to a JSONL file is read with `row_to_task(row, default_id)` (default
    id ``<file stem>#<line>``), and so is a ``hf:`` dataset (envs/hf_datasets.py); any other string is a spec ``name(k=v,...)``
    that the env's `named` resolves: its registry of source factories (`named_source`), or a function
    ``(name, kwargs) -> TaskSource``.
    """
    if isinstance(tasks, TaskSource):
        return tasks
    if isinstance(tasks, str) and tasks.startswith("hf:"):  # a Hugging Face dataset (envs/hf_datasets.py)
        return hf_source(tasks, row_to_task)
    if isinstance(tasks, (list, tuple)):
        if not tasks or not all(isinstance(t, Task) for t in tasks):
            raise ConfigError("tasks= as a list must be a non-empty list of argym.Task.")
        return ListSource(tasks, name="tasks")
    if isinstance(tasks, os.PathLike) or (
        isinstance(tasks, str) and (tasks.endswith(".jsonl") or os.path.isfile(tasks))
    ):
        path = Path(tasks)
        return read_jsonl(path, lambda row, line: row_to_task(row, f"{path.stem}#{line}"))
    if not isinstance(tasks, str):
        raise ConfigError(
            f"tasks= must be a {kind} source spec, a JSONL path, a TaskSource or a list of Task; "
            f"got {type(tasks).__name__}."
        )
    name, kwargs = parse_source_spec(tasks)
    if isinstance(named, Registry):
        return named_source(named, name, kwargs, kind)
    return named(name, kwargs)


def named_source(
    sources: Registry[SourceFactory], name: str, kwargs: dict[str, Any], kind: str
) -> TaskSource:
    """The source that `sources` registers as `name`, built with `kwargs`; ``name/arg`` passes `arg` first
    (``reasoning_gym/chain_sum``). A name or an argument the factory does not take is a `ConfigError`."""
    base, slash, arg = name.partition("/")
    if base not in sources:
        raise ConfigError(
            f"{unknown_name(base, sources.names(), sources.kind)} Or give a path to a JSONL file of {kind} tasks."
        )
    factory = sources.get(base)
    args = (arg,) if slash else ()
    signature = inspect.signature(factory)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        takes = [
            p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        raise ConfigError(f"Task source {base} takes {', '.join(takes) or 'no arguments'} ({e}).") from None
    return factory(*args, **kwargs)
