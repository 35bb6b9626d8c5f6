"""Subprocess smoke tests of `argym eval --submit` and `argym board`."""

from __future__ import annotations

import json
import subprocess
import sys

CLI = [sys.executable, "-m", "argym.cli"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300)


def test_eval_submit_then_board_show_and_export(lb_db, tmp_path):
    out = run("eval", "argym/Math-v0", "--agent", "oracle", "--episodes", "5", "--submit")
    assert out.returncode == 0, out.stderr
    assert "submitted as #1 on board" in out.stdout and str(lb_db) in out.stdout.replace("\n", "")
    out = run(
        "eval",
        "argym/Math-v0",
        "max_attempts=2",
        "--agent",
        "random",
        "--episodes",
        "5",
        "--submit",
        "--db",
        str(lb_db),
    )
    assert out.returncode == 0, out.stderr

    out = run("board")
    assert out.returncode == 0, out.stderr
    assert "oracle" in out.stdout and "random" in out.stdout and "max_attempts=2" in out.stdout
    shown = json.loads(run("board", "argym/Math-v0", "max_attempts=2", "--split", "test", "--json").stdout)
    assert len(shown) == 1 and [r["agent"] for r in shown[0]["rows"]] == ["random"]
    assert json.loads(run("board", "--split", "train", "--json").stdout) == []

    out = run("board", "export", "--html", str(tmp_path / "b.html"), "--plot", str(tmp_path / "b.png"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "b.html").stat().st_size > 1000 and (tmp_path / "b.png").stat().st_size > 1000


def test_board_errors_are_one_line(tmp_path):
    out = run("board", "export")
    assert out.returncode == 2 and "--html" in out.stderr and "Traceback" not in out.stderr
    junk = tmp_path / "junk.sqlite"
    junk.write_text("junk" * 1000)
    out = run("board", "--db", str(junk))
    assert out.returncode == 2 and "not a usable" in out.stderr and "Traceback" not in out.stderr
    out = run("board", "--since", "yesterday")
    assert out.returncode == 2 and "date" in out.stderr
