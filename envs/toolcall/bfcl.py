"""BFCL tasks: the Berkeley Function Calling Leaderboard's single-turn categories, from the `bfcl-eval` wheel.

`argym data fetch bfcl` puts the data in argym's cache
(``$ARGYM_CACHE/bfcl/<version>/``, default ``~/.cache/argym``): from an
installed ``bfcl_eval`` of the pinned version if there is one, else from the
wheel downloaded with ``pip download --no-deps`` (its own dependency tree, model
handlers and API clients, is not needed). Nothing is downloaded at run time;
missing data is an error that names the command.

Each BFCL entry becomes a `Task` (split ``test``: BFCL is a benchmark): the
question's messages as the prompt, the functions as OpenAI function tools
(BFCL's type names mapped to JSON Schema), and BFCL's function docs and
possible answers in ``meta`` for the checker (`argym.envs.toolcall.bfcl_checker`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from argym.envs.tasks import ListSource
from argym.errors import ConfigError
from argym.types import Task

BFCL_VERSION = "2026.3.23"
# argym's category name -> BFCL v4 file stem; every single-turn category graded by AST matching
CATEGORIES: dict[str, str] = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
    "live_parallel_multiple": "live_parallel_multiple",
    "live_irrelevance": "live_irrelevance",
}
IRRELEVANCE = ("irrelevance", "live_irrelevance")
# Entries no answer can pass under BFCL's own rules (a required parameter whose possible answers are
# empty or only "omitted", or a possible answer naming a parameter the function lacks). They are left
# out; tests/envs/toolcall checks that BFCL's checker rejects them too.
UNSATISFIABLE = frozenset(
    {
        "live_simple_106-63-0",
        "live_simple_112-68-0",  # required parameters with no allowed value
        "live_multiple_507-149-4",
        "live_multiple_964-207-0",  # required parameter only allowed to be omitted
        "live_multiple_862-181-3",  # the possible answer uses a parameter the function does not document
    }
)
_JSON_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
}


def cache_dir() -> Path:
    """argym's cache: ``$ARGYM_CACHE``, else ``~/.cache/argym`` (as the Makefile)."""
    return Path(os.environ.get("ARGYM_CACHE") or Path.home() / ".cache" / "argym")


def bfcl_root() -> Path:
    """Where the fetched ``bfcl_eval`` package tree lives (its ``data/`` and ``eval_checker/``)."""
    return cache_dir() / "bfcl" / BFCL_VERSION / "bfcl_eval"


def data_dir() -> Path:
    """BFCL's data folder; a `ConfigError` naming the setup command if it has not been fetched."""
    root = bfcl_root()
    if not (root.parent / ".complete").is_file():
        raise ConfigError(
            f"BFCL data (bfcl-eval {BFCL_VERSION}) is not in {root.parent}. "
            f"Fetch it once with: argym data fetch bfcl"
        )
    return root / "data"


def fetch(pip: list[str] | None = None) -> Path:
    """Put BFCL's package tree (data and checker sources) into the cache; returns its folder.

    Uses an installed ``bfcl_eval`` of the pinned version when there is one,
    else ``pip download --no-deps bfcl-eval==VERSION``. Idempotent.
    """
    root = bfcl_root()
    done = root.parent / ".complete"
    if done.is_file():
        return root
    tmp = root.parent.with_name(root.parent.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    installed = _installed_package()
    if installed is not None:
        shutil.copytree(installed, tmp / "bfcl_eval", ignore=shutil.ignore_patterns("__pycache__"))
    else:
        wheels = cache_dir() / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        wheel = _wheel(wheels)
        if wheel is None:
            cmd = [
                *(pip or [sys.executable, "-m", "pip"]),
                "download",
                "-q",
                "--no-deps",
                f"bfcl-eval=={BFCL_VERSION}",
                "-d",
                str(wheels),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wheel = _wheel(wheels)
            if proc.returncode != 0 or wheel is None:
                raise ConfigError(
                    f"Could not download bfcl-eval=={BFCL_VERSION} ({' '.join(cmd)}):\n"
                    f"{proc.stderr.strip()[-2000:]}"
                )
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tmp, [n for n in z.namelist() if n.startswith("bfcl_eval/")])
    missing = [
        c for c in CATEGORIES.values() if not (tmp / "bfcl_eval" / "data" / f"BFCL_v4_{c}.json").is_file()
    ]
    if missing:
        raise ConfigError(f"bfcl-eval {BFCL_VERSION} lacks the data files of {missing}.")
    shutil.rmtree(root.parent, ignore_errors=True)
    tmp.rename(root.parent)
    done.write_text(BFCL_VERSION + "\n")
    return root


def _wheel(folder: Path) -> Path | None:
    found = sorted(folder.glob(f"bfcl_eval-{BFCL_VERSION}-*.whl"))
    return found[0] if found else None


def _installed_package() -> Path | None:
    """An installed bfcl_eval of the pinned version, found without importing it (its imports are heavy)."""
    from importlib import metadata, util

    try:
        if metadata.version("bfcl-eval") != BFCL_VERSION:
            return None
        spec = util.find_spec("bfcl_eval")
    except (metadata.PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@lru_cache(maxsize=len(CATEGORIES))
def load_category(category: str) -> tuple[Task, ...]:
    """Every task of one category, in BFCL's order."""
    if category not in CATEGORIES:
        raise ConfigError(f"Unknown BFCL category {category!r}; choose from {', '.join(CATEGORIES)}.")
    data = data_dir()
    stem = CATEGORIES[category]
    rows = _read_jsonl(data / f"BFCL_v4_{stem}.json")
    answers: dict[str, Any] = {}
    if category not in IRRELEVANCE:
        answers = {
            r["id"]: r["ground_truth"] for r in _read_jsonl(data / "possible_answer" / f"BFCL_v4_{stem}.json")
        }
    tasks = []
    for row in rows:
        if row["id"] in UNSATISFIABLE:
            continue
        if category not in IRRELEVANCE and row["id"] not in answers:
            raise ConfigError(
                f"BFCL task {row['id']!r} has no possible answer; the cached data is damaged: "
                f"remove {bfcl_root().parent} and run `argym data fetch bfcl` again."
            )
        functions = row["function"]
        tasks.append(
            Task(
                id=row["id"],
                prompt=tuple(row["question"][0]),
                split="test",
                answer=json.dumps(answers.get(row["id"])),
                tools=tuple({"type": "function", "function": to_json_schema(f)} for f in functions),
                meta={
                    "source": "bfcl",
                    "category": category,
                    "functions": functions,
                    "ground_truth": answers.get(row["id"]),
                },
            )
        )
    return tuple(tasks)


def bfcl_source(categories: list[str] | None = None, per_category: int | None = None) -> ListSource:
    """The tasks of `categories` (all by default), the first `per_category` of each if given."""
    chosen = categories or list(CATEGORIES)
    tasks: list[Task] = []
    for c in chosen:
        tasks.extend(load_category(c)[:per_category])
    name = "bfcl" if categories is None else f"bfcl/{','.join(chosen)}"
    return ListSource(tasks, name=name)


def to_json_schema(function: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as an OpenAI function schema: BFCL's type names mapped to JSON Schema's."""
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "parameters": _schema(function.get("parameters") or {"type": "dict", "properties": {}}),
    }


def _schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "type" and isinstance(v, str):
            if v in _JSON_TYPES:  # "any": no type constraint
                out[k] = _JSON_TYPES[v]
        else:
            out[k] = _schema(v)
    return out


def oracle_calls(task: Task) -> list[tuple[str, dict[str, Any]]]:
    """A correct answer from the ground truth: optional parameters left out, the first allowed value for the rest."""
    truth = task.meta.get("ground_truth")
    if truth is None:
        return []
    docs = {f["name"]: f for f in task.meta["functions"]}
    calls = []
    for entry in truth:
        for name, params in entry.items():
            required = (docs.get(name, {}).get("parameters") or {}).get("required") or []
            calls.append((name, _pick(params, set(required))))
    return calls


def _pick(allowed: dict[str, list[Any]], required: set[str], top: bool = True) -> dict[str, Any]:
    """One concrete argument dict. At the top level a dict or list-of-dicts value is itself a possible-answer
    structure (keys -> allowed values); one level down, values are literal (as BFCL's checker reads them)."""
    out = {}
    for param, values in allowed.items():
        given = [v for v in values if v != ""]
        if not given or ("" in values and param not in required):
            continue
        value = given[0]
        if top and isinstance(value, dict):
            value = _pick(value, set(), top=False)
        elif top and isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            value = [_pick(v, set(), top=False) for v in value]
        out[param] = value
    return out
