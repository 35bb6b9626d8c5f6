"""Tasks from a Hugging Face `datasets` dataset: ``tasks=hf:PATH_OR_NAME[:split](col_key=COLUMN, ...)``.

PATH_OR_NAME is a directory written by ``Dataset.save_to_disk``, a local ``.parquet``, ``.jsonl``,
``.json`` or ``.csv`` file, or a hub name already in the local cache (argym never downloads at
``make``; set ``HF_DATASETS_OFFLINE=1`` to be sure). ``:split`` picks the dataset's split (needed
only when it has several). Each row becomes a task through the env's own row reader, the one its
JSONL files use, so the columns are the JSONL fields (Math: ``question``, ``answer``; Code:
``prompt``, ``tests``, ``entry_point``); ``FIELD_key=COLUMN`` reads a field from another column,
e.g. ``hf:openai/gsm8k:test(question_key=problem,answer_key=solution)``, and ``config=NAME``
names the dataset's configuration. Rows are split into train and test by the hash of their id,
as JSONL rows are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from argym.envs.tasks import ListSource, parse_source_spec, rows_source
from argym.errors import ConfigError, MissingDependencyError
from argym.types import Task

PREFIX = "hf:"
FILE_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}


def is_hf_spec(tasks: Any) -> bool:
    return isinstance(tasks, str) and tasks.startswith(PREFIX)


def hf_source(spec: str, row_to_task: Callable[[dict[str, Any], str], Task]) -> ListSource:
    """The tasks of the dataset `spec` names (see the module docstring), read by `row_to_task(row, id)`."""
    target, kwargs = parse_source_spec(spec[len(PREFIX) :])
    config = kwargs.pop("config", None)
    columns: dict[str, str] = {}
    for key, column in kwargs.items():
        if not key.endswith("_key") or not isinstance(column, str):
            raise ConfigError(
                f"{spec!r}: {key}={column!r} is not a column mapping; use FIELD_key=COLUMN "
                "(e.g. question_key=problem) or config=NAME."
            )
        columns[key.removesuffix("_key")] = column
    path, split = _path_and_split(target)
    dataset = _load(spec, path, split, config)
    missing = sorted(set(columns.values()) - set(dataset.column_names))
    if missing:
        raise ConfigError(
            f"{spec!r}: no column {', '.join(missing)}; its columns: {', '.join(dataset.column_names)}."
        )
    name = Path(path).name or path

    def rows() -> Iterator[tuple[str, int, Any]]:
        for i, row in enumerate(dataset):
            for field, column in columns.items():
                row[field] = row[column]
            yield f"{spec} row {i}", i, row

    return rows_source(rows(), lambda row, i: row_to_task(row, f"{name}#{i}"), name=spec, what="Dataset")


def _path_and_split(target: str) -> tuple[str, str | None]:
    """``PATH_OR_NAME[:split]``: the last ``:`` starts a split name unless what follows is a path."""
    path, sep, split = target.rpartition(":")
    if not sep or not path or "/" in split or "." in split:
        return target, None
    return path, split


def _load(spec: str, path: str, split: str | None, config: str | None) -> Any:
    try:
        import datasets
    except ImportError:
        raise MissingDependencyError("datasets", "datasets", f"tasks={spec!r}") from None
    local = Path(path).expanduser()
    try:
        if local.is_dir() and any((local / f).is_file() for f in ("dataset_info.json", "dataset_dict.json")):
            loaded = datasets.load_from_disk(str(local))
        elif local.is_file():
            builder = FILE_BUILDERS.get(local.suffix)
            if builder is None:
                raise ConfigError(
                    f"{spec!r}: cannot read {local.suffix!r} files; use one of {', '.join(FILE_BUILDERS)}."
                )
            loaded = datasets.load_dataset(builder, data_files=str(local))
        else:
            loaded = datasets.load_dataset(path, config, split=split)
    except ConfigError:
        raise
    except (FileNotFoundError, ValueError, ConnectionError, OSError) as e:
        raise ConfigError(
            f"{spec!r}: cannot load dataset {path!r} ({type(e).__name__}: {e}). Give a directory written by "
            "save_to_disk, a .parquet/.jsonl/.csv file, or the name of a dataset in the local cache."
        ) from None
    if isinstance(loaded, datasets.DatasetDict):
        splits = list(loaded)
        if split is None and len(splits) == 1:
            split = splits[0]
        if split not in loaded:
            raise ConfigError(
                f"{spec!r}: {'name a split' if split is None else f'no split {split!r}'}; "
                f"the dataset has {', '.join(splits)} (e.g. hf:{path}:{splits[0]})."
            )
        loaded = loaded[split]
    return loaded
