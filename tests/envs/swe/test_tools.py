"""Each SWE tool's behaviour in a real workspace (process backend): views and ranges, search, unique-match
str_replace, insert, create, undo, run's timeout and truncation, and paths outside the repository refused."""

from __future__ import annotations

import json

from argym.envs.swe.tools import TOOLS, truncate

ID = None


def call(env, name, **args):
    obs, reward, term, trunc, info = env.step(
        f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"
    )
    assert obs[-1]["role"] == "tool" and obs[-1]["name"] == name
    return obs[-1]["content"], info


def fresh(env):
    ids = [t.id for t in env.tasks.iter_split("all") if t.id.startswith("pytoolz")]
    obs, _ = env.reset(options={"task_id": ids[0]})
    return obs


def test_tools_have_openai_schemas(penv) -> None:
    obs = fresh(penv)
    names = [t["function"]["name"] for t in TOOLS]
    assert names == ["view", "search", "str_replace", "insert", "create", "undo_edit", "run", "submit"]
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in TOOLS)
    assert obs[0]["role"] == "system" and '"name": "str_replace"' in obs[0]["content"]
    assert obs[1]["role"] == "user" and "fail" in obs[1]["content"]


def test_view_file_ranges_and_directories(penv) -> None:
    fresh(penv)
    out, _ = call(penv, "view", path="toolz/__init__.py", view_range=[2, 4])
    assert out.startswith("toolz/__init__.py (lines 2-4 of ")
    assert [ln.split("\t")[0].strip() for ln in out.splitlines()[1:]] == ["2", "3", "4"]
    out, _ = call(penv, "view", path="toolz/__init__.py", view_range=[3, -1])
    assert out.splitlines()[1].startswith("     3\t")
    out, info = call(penv, "view", path="toolz/__init__.py", view_range=[50, 10])
    assert out.startswith("Error: view_range") and info["verdict"]["calls"][0]["ok"] is False
    out, _ = call(penv, "view", path=".")
    assert "toolz/" in out and "toolz/itertoolz.py" in out and ".git" not in out
    out, _ = call(penv, "view", path="no/such/file.py")
    assert out == "Error: no/such/file.py does not exist."


def test_search_finds_literal_strings(penv) -> None:
    fresh(penv)
    out, _ = call(penv, "search", search_term="def groupby(")
    assert "toolz/itertoolz.py:" in out and "matches for" in out
    out, _ = call(penv, "search", search_term="zzz_not_there_zzz", path="toolz")
    assert out.startswith("No matches")


def test_str_replace_needs_a_unique_match_and_undo_restores(penv) -> None:
    fresh(penv)
    path = "toolz/itertoolz.py"
    out, _ = call(penv, "str_replace", path=path, old_str="def nowhere_to_be_found(", new_str="x")
    assert "was not found" in out
    out, _ = call(penv, "str_replace", path=path, old_str="return ", new_str="return  ")
    assert "occurs" in out and "times" in out and "unique" in out
    out, _ = call(
        penv,
        "str_replace",
        path=path,
        old_str="def groupby(key, seq):",
        new_str="def groupby(key, seq):  # edited",
    )
    assert out.startswith("Edited toolz/itertoolz.py") and "# edited" in out
    out, _ = call(penv, "run", command="grep -c '# edited' toolz/itertoolz.py")
    assert out == "Exit code: 0\n1"
    out, _ = call(penv, "insert", path=path, insert_line=0, new_str="# top line")
    out, _ = call(penv, "view", path=path, view_range=[1, 1])
    assert out.endswith("1\t# top line")
    out, _ = call(penv, "undo_edit", path=path)
    assert out.startswith("Restored")
    out, _ = call(penv, "undo_edit", path="/testbed/" + path)  # the same file, spelled absolutely
    out, _ = call(penv, "run", command="git status --porcelain")
    assert out == "Exit code: 0"  # both edits undone: the tree is the base commit again
    out, _ = call(penv, "undo_edit", path=path)
    assert out.startswith("Error: there is no edit")


def test_create_refuses_existing_files_and_undo_removes_new_ones(penv) -> None:
    fresh(penv)
    out, _ = call(penv, "create", path="toolz/__init__.py", file_text="x")
    assert "already exists" in out
    out, _ = call(penv, "create", path="scratch/new.py", file_text="print('hi')\n")
    assert out.startswith("Created scratch/new.py")
    out, _ = call(penv, "run", command="python3 scratch/new.py")
    assert out == "Exit code: 0\nhi"
    out, _ = call(penv, "undo_edit", path="scratch/new.py")
    assert out.startswith("Removed")
    out, _ = call(penv, "run", command="test -e scratch/new.py; echo $?")
    assert out.endswith("\n1")


def test_paths_outside_the_repository_are_refused(penv) -> None:
    fresh(penv)
    for path in ("/etc/passwd", "../etc/passwd", "/testbed/../etc/hostname", "/opt/argym/base.git/HEAD"):
        out, _ = call(penv, "view", path=path)
        assert "outside the repository" in out, path
    out, _ = call(penv, "create", path="/tmp/x.py", file_text="x")
    assert "outside the repository" in out
    call(penv, "run", command="ln -s /etc/passwd passwd_link && ln -s / rootlink")
    out, _ = call(penv, "view", path="passwd_link")
    assert "outside the repository" in out
    out, _ = call(penv, "str_replace", path="rootlink/etc/hostname", old_str="a", new_str="b")
    assert "outside the repository" in out


def test_run_times_out_and_truncates_output(penv) -> None:
    fresh(penv)
    out, info = call(penv, "run", command="sleep 30")
    assert out.startswith("The command timed out after 5 s") and info["verdict"]["calls"][0]["timed_out"]
    out, _ = call(penv, "run", command="seq 1 5000")
    assert out.startswith("Exit code: 0\n1\n2\n") and out.endswith("4999\n5000") and "characters cut" in out
    assert len(out) < 600
    out, _ = call(penv, "run", command="exit 3")
    assert out == "Exit code: 3"


def test_malformed_calls_are_observations(penv) -> None:
    fresh(penv)
    obs, reward, term, trunc, info = penv.step(
        '<tool_call>{"name": "view", "arguments": {"pth": "x"}}</tool_call>'
    )
    assert (
        obs[-1]["role"] == "tool" and "Invalid arguments for 'view'" in obs[-1]["content"] and reward == 0.0
    )
    obs, *_ = penv.step('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>')
    assert "Unknown tool 'rm_rf'" in obs[-1]["content"]
    obs, *_ = penv.step("I think the bug is in groupby.")
    assert obs[-1]["role"] == "user" and "called no tool" in obs[-1]["content"]
    obs, *_ = penv.step('<tool_call>{"name": "view", "arguments": {</tool_call>')
    assert obs[-1]["role"] == "user" and "not valid JSON" in obs[-1]["content"]


def test_truncate_keeps_head_and_tail() -> None:
    assert truncate("abc", 10) == "abc"
    out = truncate("a" * 50 + "b" * 50, 20)
    assert out.startswith("a" * 10) and out.endswith("b" * 10) and "[... 80 characters cut ...]" in out
