"""Board polish: titles name only the non-default kwargs (all of them on hover), every column has a header,
agent names never wrap in the terminal, the submit message shows the board as the board does."""

from __future__ import annotations

import json
import subprocess
import sys

from rich.console import Console

import argym.leaderboards as lb
from argym.leaderboards.render import board_table, print_boards

LONG_AGENT = "tiny:runs/a-rather-long-experiment-name/checkpoint-step-0100"


def test_the_title_names_only_kwargs_off_their_defaults_and_the_page_shows_all_on_hover(result):
    r = result([True, False], env_kwargs={"max_attempts": 3, "timeout_s": 10.0})
    r["env_defaults"] = {"timeout_s": 10.0, "feedback": True, "tasks_per_file": 100}
    rec = lb.submit(r)
    [b] = lb.boards()
    assert rec["label"] == b.label and "max_attempts=3" in b.label
    assert "timeout_s" not in b.label and "feedback" not in b.label
    html = board_table(b, lambda row: "#")
    assert 'title="feedback=True max_attempts=3 tasks_per_file=100 timeout_s=10.0"' in html


def test_every_column_has_a_header(result):
    lb.submit(result([True, False]))
    html = board_table(lb.boards()[0], lambda row: "#")
    assert "<th></th>" not in html and "interval (0&ndash;1)" in html


def test_the_terminal_table_never_wraps_an_agent_name(result):
    lb.submit(result([True, False], agent=LONG_AGENT))
    lb.submit(result([False, False], agent="random"))
    console = Console(record=True, width=100)
    print_boards(lb.boards(), console)
    assert LONG_AGENT in console.export_text()


def test_the_submit_message_shows_the_board_as_it_is_shown_and_a_whole_command(lb_db, tmp_path):
    cli = [sys.executable, "-m", "argym.cli"]
    args = ["eval", "argym/Math-v0", "max_attempts=2", "--agent", "oracle", "--episodes", "2", "--submit"]
    env = {"COLUMNS": "60", "PATH": "/usr/bin:/bin", "ARGYM_LEADERBOARD": str(lb_db), "HOME": str(tmp_path)}
    out = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    [board] = json.loads(
        subprocess.run([*cli, "board", "--json"], capture_output=True, text=True, env=env).stdout
    )
    lines = out.stdout.splitlines()
    assert f"submitted as #1 on board {board['key']}: {board['label']}" in lines
    assert (
        f"  see it with: argym board argym/Math-v0 --key {board['key']}" in lines
    )  # one line, at 60 columns
    again = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=300, env=env)
    assert f"submitted as #2 on board {board['key']}: {board['label']}" in again.stdout.splitlines()
