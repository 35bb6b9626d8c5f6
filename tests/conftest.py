"""The suite's two sizes, and how it is spread over processes.

Sizes: `make test` (CI) runs a representative sample of the heavy matrices, and
`make test-full` (ARGYM_TEST_FULL=1) runs every member. A test marked `full` is a further member of a
matrix whose representative runs in CI (named in its marker's reason); CI deselects it, so it is
never reported as skipped, and a skip still means what it says (a one-process run counts the
deselected; under pytest-xdist the workers deselect and the summary leaves them out).

Processes: `make test` runs pytest-xdist workers with `--dist loadfile`: each test module is one unit of
work, so its module fixtures (a vLLM engine, a served model, the quickstart's warm start in
algorithms/test_learns.py) are built once. Tests that must share something costly live in one module.
"""

from __future__ import annotations

import os

import pytest

FULL = os.environ.get("ARGYM_TEST_FULL") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    kept: list[pytest.Item] = []
    full: list[pytest.Item] = []
    for item in items:
        (full if item.get_closest_marker("full") is not None else kept).append(item)
    if full:
        config.hook.pytest_deselected(items=full)
        items[:] = kept
