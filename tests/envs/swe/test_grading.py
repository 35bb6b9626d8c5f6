"""SWE-bench grading rules: test and steering files never count, missing/skipped/errored tests fail, a passing
log with a failing exit is rejected, swebench's parser reads the log, and an instance's test_patch is applied
in the fresh grading workspace only."""

from __future__ import annotations

import dataclasses
import json

import argym
from argym.envs.swe.diffs import header_path, is_test_path, split_diff
from argym.envs.swe.grading import (
    END,
    START,
    Sentinels,
    conflicting,
    parse_log,
    resolve,
)
from argym.envs.swe.instances import SHIPPED, Instance, read_instances

INST = Instance(
    instance_id="x",
    repo="x/y",
    base_commit="b",
    problem_statement="p",
    patch="",
    test_patch="",
    FAIL_TO_PASS=("t.py::a",),
    PASS_TO_PASS=("t.py::b", "t.py::c"),
    sdist="s",
)


def _diff(path: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x\n+y\n"


def test_test_files_and_steering_files_are_dropped_from_the_diff() -> None:
    keep = ["toolz/itertoolz.py", "boltons/iterutils.py", "src/pkg/testing_helpers.py"]
    drop = [
        "toolz/tests/test_itertoolz.py",
        "tests/test_more.py",
        "conftest.py",
        "pkg/conftest.py",
        "setup.cfg",
        "pyproject.toml",
        "tox.ini",
        "pytest.ini",
        "sitecustomize.py",
        "x.pth",
        "pkg/test_util.py",
        "toolz/__pycache__/conftest.cpython-311-pytest-8.3.4.pyc",  # compiled files and caches
        "__pycache__/setup.cpython-311.pyc",
        "toolz/itertoolz.pyc",
        "toolz/itertoolz.pyo",
        ".pytest_cache/v/cache/lastfailed",
    ]
    kept, files, dropped = split_diff("".join(_diff(p) for p in keep + drop))
    assert files == sorted(keep) and dropped == sorted(drop)
    assert kept == "".join(_diff(p) for p in keep)
    assert not any(is_test_path(p) for p in keep) and all(is_test_path(p) for p in drop)


def test_resolution_rules() -> None:
    def log(lines):
        return f"{START}\n" + "\n".join(lines) + f"\n{END}\n"

    ok = parse_log(log(["PASSED t.py::a", "PASSED t.py::b", "PASSED t.py::c"]))
    assert ok == {"t.py::a": "PASSED", "t.py::b": "PASSED", "t.py::c": "PASSED"}
    assert resolve(INST, ok, 0)["resolved"] is True
    rejected = resolve(INST, ok, 1)
    assert rejected["resolved"] is False and "exited with 1" in rejected["rejected"]
    for bad in (
        ["PASSED t.py::a", "PASSED t.py::b"],  # a P2P test missing
        ["PASSED t.py::a", "PASSED t.py::b", "SKIPPED t.py::c"],  # skipped
        ["ERROR t.py::a", "PASSED t.py::b", "PASSED t.py::c"],  # errored
        ["FAILED t.py::a - assert 1 == 2", "PASSED t.py::b", "PASSED t.py::c"],
    ):
        v = resolve(INST, parse_log(log(bad)), 1)
        assert v["resolved"] is False and v["rejected"] == ""
    assert parse_log("PASSED t.py::a\n") == {}  # no markers, no results
    v = resolve(INST, parse_log(log(["FAILED t.py::a - x", "PASSED t.py::b"])), 1)
    assert v["tests"] == {"t.py::a": "FAILED", "t.py::b": "PASSED", "t.py::c": "MISSING"}
    assert v["FAIL_TO_PASS"] == {"passed": 0, "total": 1} and v["PASS_TO_PASS"] == {"passed": 1, "total": 2}


def _new_file_patch(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{ln}\n" for ln in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1,{len(lines)} @@\n{body}"
    )


def test_test_patch_is_applied_only_in_the_grading_workspace(tmp_path, need) -> None:
    need("process")
    inst = next(
        i
        for i in read_instances(SHIPPED)
        if i.repo == "pytoolz/toolz" and "[" not in i.FAIL_TO_PASS[0] and i.FAIL_TO_PASS[0].count("::") == 1
    )
    path, func = inst.FAIL_TO_PASS[0].split("::")
    module = path.removesuffix(".py").replace("/", ".")
    new_test = "toolz/tests/test_argym_hidden.py"
    patch = _new_file_patch(
        new_test, f"from {module} import {func} as check\n\n\ndef test_hidden():\n    check()\n"
    )
    hidden = dataclasses.replace(
        inst,
        instance_id=inst.instance_id + ".hidden",
        test_patch=patch,
        FAIL_TO_PASS=(*inst.FAIL_TO_PASS, f"{new_test}::test_hidden"),
    )
    path = tmp_path / "hidden.jsonl"
    path.write_text(json.dumps(hidden.to_row()) + "\n")
    with argym.make("argym/SWE-v0", tasks=str(path), split="all").unwrapped as env:
        env.reset(seed=0)
        obs, *_ = env.step(
            '<tool_call>{"name": "run", "arguments": {"command": "ls toolz/tests | grep -c hidden"}}'
            "</tool_call>"
        )
        assert obs[-1]["content"].splitlines()[-1] == "0"  # the agent never sees the test patch
        while True:
            obs, reward, term, trunc, info = env.step(env.oracle_action())
            if term or trunc:
                break
        assert reward == 1.0 and info["verdict"]["tests"][f"{new_test}::test_hidden"] == "PASSED", info[
            "verdict"
        ]
        env.reset(seed=0)
        obs, reward, *_, info = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
        assert reward == 0.0 and info["verdict"]["tests"][f"{new_test}::test_hidden"] == "FAILED"


def test_diff_headers_are_read_fail_closed() -> None:
    assert header_path("diff --git a/pkg/x y.py b/pkg/x y.py") == "pkg/x y.py"
    assert header_path('diff --git "a/pkg/t\\303\\244st.py" "b/pkg/t\\303\\244st.py"') == "pkg/täst.py"
    assert header_path('diff --git "a/a\\"b\\n.py" "b/a\\"b\\n.py"') == 'a"b\n.py'
    for bad in (
        "diff --git evil/conftest.py evil/conftest.py",  # diff.noprefix
        "diff --git i/evil/conftest.py w/evil/conftest.py",  # diff.mnemonicPrefix
        "diff --git a/x.py b/conftest.py",
        "diff --git a/ b/",
    ):
        assert header_path(bad) is None, bad
    noprefix = (
        "diff --git evil/conftest.py evil/conftest.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ evil/conftest.py\n"
    )
    kept, files, dropped = split_diff(_diff("src/ok.py") + noprefix)
    assert kept == _diff("src/ok.py") and files == ["src/ok.py"] and dropped == [noprefix.split("\n")[0]]
    for path in (
        "pytest.toml",
        ".pytest.toml",
        ".pytest.ini",
        "pkg/.pytest.ini",
        "evil-1.0.dist-info/entry_points.txt",
        "src/evil.egg-info/entry_points.txt",
        "pytest.py",
        "_pytest/main.py",
        "pluggy/__init__.py",
    ):
        assert is_test_path(path), path
    assert not any(is_test_path(p) for p in ("src/pytest_helpers.py", "pkg/pytest.py", "src/_pytest/main.py"))


def test_sentinels_decide_whether_a_run_is_trusted() -> None:
    s = Sentinels("t_s.py", "t_s.py::test_f", "t_s.py::test_p")
    honest = {
        "t.py::a": "PASSED",
        "t.py::b": "PASSED",
        "t.py::c": "PASSED",
        s.must_fail: "FAILED",
        s.must_pass: "PASSED",
    }
    assert resolve(INST, honest, 1, s)["resolved"] is True
    v = resolve(INST, honest, 0, s)  # the must-fail sentinel failed, yet the command exited 0
    assert v["resolved"] is False and not v["tampered"] and "exited with 0" in v["rejected"]
    for fail, ok in (
        ("PASSED", "PASSED"),
        ("XFAIL", "PASSED"),
        ("FAILED", "FAILED"),
        ("MISSING", "MISSING"),
        ("FAILED", "MISSING"),
    ):
        statuses = {**honest, s.must_fail: fail, s.must_pass: ok}
        statuses = {k: v for k, v in statuses.items() if v != "MISSING"}
        v = resolve(INST, statuses, 1, s)
        assert v["resolved"] is False and v["tampered"] is True and v["rejected"].startswith("tampered"), (
            fail,
            ok,
        )
    for statuses, code in (({}, None), ({}, 2), ({s.must_pass: "PASSED"}, None)):
        v = resolve(
            INST, statuses, code, s
        )  # a run cut short (timeout) or that ran nothing: unresolved, no more
        assert v["resolved"] is False and v["tampered"] is False
    v = resolve(INST, {**honest, s.must_fail: "PASSED"}, None, s)
    assert v["tampered"] is True  # a wrong status is tampering even in a run cut short
    v = resolve(INST, honest, 1, s, conflicts=["t.py::a"])
    assert v["resolved"] is False and v["tampered"] is True and "two different statuses" in v["rejected"]
    log = f"{START}\nFAILED t.py::a - x\nPASSED t.py::b\nPASSED t.py::a\n{END}\n"
    assert conflicting(log) == ["t.py::a"] and conflicting(log.replace("FAILED t.py::a - x\n", "")) == []


def test_the_grader_rejects_a_patch_that_writes_test_files_whatever_its_text(need, swe_sandbox) -> None:
    need("process")  # the on-disk check, without split_diff: a forged diff goes straight to `grade`
    from argym.envs.swe.grading import grade
    from argym.envs.swe.project import base_repo
    from argym.envs.swe.workspace import open_workspace

    inst = next(i for i in read_instances(SHIPPED) if i.repo == "pytoolz/toolz")
    ws = open_workspace(swe_sandbox("process"), base_repo(inst.sdist, inst.patch, inst.base_commit))
    try:
        v = grade(ws, inst, _new_file_patch("evil/conftest.py", "import sys\n"), timeout_s=60)
    finally:
        ws.close()
    assert v["resolved"] is False and v["patch"] == "rejected" and v["tampered"] is True
    assert "evil/conftest.py" in v["rejected"]


def test_the_on_disk_check_ignores_gitignore(need, swe_sandbox) -> None:
    need("process")
    from argym.envs.swe.grading import grade
    from argym.envs.swe.project import base_repo
    from argym.envs.swe.workspace import open_workspace

    inst = next(i for i in read_instances(SHIPPED) if i.repo == "pytoolz/toolz")
    ws = open_workspace(swe_sandbox("process"), base_repo(inst.sdist, inst.patch, inst.base_commit))
    try:  # a forged diff that also ignores what it writes
        forged = _new_file_patch("src/.gitignore", "conftest.py\n") + _new_file_patch(
            "src/conftest.py", "x = 1\n"
        )
        v = grade(ws, inst, forged, timeout_s=60)
    finally:
        ws.close()
    assert v["patch"] == "rejected" and v["tampered"] is True and "src/conftest.py" in v["rejected"], v


def test_the_grader_rejects_a_patch_that_writes_compiled_files_or_caches(need, swe_sandbox) -> None:
    """pytest loads a conftest's cached, rewritten bytecode in its place: a patch given straight to `grade`
    (not through `agent_diff`, which leaves caches out) that writes one is refused on disk."""
    need("process")
    from argym.envs.swe.grading import grade
    from argym.envs.swe.project import base_repo
    from argym.envs.swe.workspace import open_workspace

    inst = next(i for i in read_instances(SHIPPED) if i.repo == "pytoolz/toolz")
    ws = open_workspace(swe_sandbox("process"), base_repo(inst.sdist, inst.patch, inst.base_commit))
    pyc = "toolz/__pycache__/conftest.cpython-311-pytest-8.3.4.pyc"
    try:
        for path in (pyc, "toolz/__pycache__/itertoolz.cpython-311.pyc", "toolz/itertoolz.pyc"):
            v = grade(ws, inst, _new_file_patch(path, "forged bytecode\n"), timeout_s=60)
            assert v["patch"] == "rejected" and v["tampered"] is True and path in v["rejected"], v
    finally:
        ws.close()


def test_the_grader_names_the_config_file_pytest_would_pick_in_the_base_tree(tmp_path) -> None:
    from argym.envs.swe.grading import base_config, draw_sentinels

    inst = dataclasses.replace(
        INST, FAIL_TO_PASS=("pkg/tests/a/test_x.py::t",), PASS_TO_PASS=("pkg/tests/b/test_y.py::u",)
    )
    (tmp_path / "pkg/tests").mkdir(parents=True)
    assert base_config(tmp_path, inst) is None
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = x\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert base_config(tmp_path, inst) is None  # neither has a pytest section
    (tmp_path / "tox.ini").write_text("[pytest]\naddopts = -ra\n")
    assert base_config(tmp_path, inst) == "tox.ini"
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-ra'\n")
    assert base_config(tmp_path, inst) == "pyproject.toml"  # pytest's order in one folder
    (tmp_path / "pkg/tests/.pytest.ini").write_text("")
    assert base_config(tmp_path, inst) == "pkg/tests/.pytest.ini"  # the tests' common folder comes first

    class Ws:
        base = str(tmp_path)

    assert draw_sentinels(Ws(), inst).path.startswith("pkg/tests/a/test_")  # type: ignore[arg-type]
    (tmp_path / "pkg/tests/.pytest.ini").write_text("[pytest]\npython_functions = check_*\n")
    assert draw_sentinels(Ws(), inst) is None  # test_* sentinels would not be collected there
