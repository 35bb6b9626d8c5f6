"""Many processes submitting at once: every submission lands exactly once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from argym.leaderboards.store import Store

WRITER = """
import json, sys
import argym.leaderboards as lb
results = json.loads(sys.stdin.read())
for r in results:
    lb.submit(r)
print("done", len(results))
"""

PROCESSES, PER_PROCESS = 8, 50


@pytest.mark.slow
def test_8_processes_x_50_concurrent_submissions(result, lb_db):
    Store(lb_db).close()  # let the writers find the schema; creation under contention is tested below
    procs = []
    for p in range(PROCESSES):
        batch = [
            result([(i + j) % 3 == 0 for j in range(6)], agent=f"proc{p}", seed=i) for i in range(PER_PROCESS)
        ]
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append((proc, json.dumps(batch)))
    for proc, payload in procs:
        proc.stdin.write(payload)
        proc.stdin.close()
    for proc, _ in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        assert proc.stdout.read().strip() == f"done {PER_PROCESS}"
    with Store(lb_db) as store:
        assert store.count() == PROCESSES * PER_PROCESS
        rows = store._conn.execute("SELECT agent, seed FROM submissions").fetchall()
        assert len({(r[0], r[1]) for r in rows}) == PROCESSES * PER_PROCESS
        assert (
            store._conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] == PROCESSES * PER_PROCESS * 6
        )
        assert len(store.boards()) == 1


def test_first_open_under_contention(tmp_path):
    """Several processes creating the same new file at once agree on one schema."""
    path = tmp_path / "fresh.sqlite"
    code = (
        "import sys; from argym.leaderboards.store import Store\n"
        "s = Store(sys.argv[1]); print(s.schema_version()); s.close()"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert all(rc == 0 for rc, _, _ in outs), [e for _, _, e in outs]
    assert {o.strip() for _, o, _ in outs} == {"4"}  # SCHEMA_VERSION
