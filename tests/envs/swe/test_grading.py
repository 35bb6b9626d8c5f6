"""SWE-bench grading rules: test and steering files never count, missing/skipped/errored tests fail, a passing
log with a failing exit is rejected, swebench's parser reads the log, and an instance's test_patch is applied
in the fresh grading workspace only."""

from __future__ import annotations

import dataclasses
import json

import argym
from argym.envs.swe.grading import END, START, is_test_path, parse_log, resolve, split_diff
from argym.envs.swe.instances import SHIPPED, Instance, read_instances

INST = Instance(instance_id="x", repo="x/y", base_commit="b", problem_statement="p", patch="", test_patch="",
                FAIL_TO_PASS=("t.py::a",), PASS_TO_PASS=("t.py::b", "t.py::c"), sdist="s")


def _diff(path: str) -> str:
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-x\n+y\n"


def test_test_files_and_steering_files_are_dropped_from_the_diff() -> None:
    keep = ["toolz/itertoolz.py", "boltons/iterutils.py", "src/pkg/testing_helpers.py"]
    drop = ["toolz/tests/test_itertoolz.py", "tests/test_more.py", "conftest.py", "pkg/conftest.py", "setup.cfg",
            "pyproject.toml", "tox.ini", "pytest.ini", "sitecustomize.py", "x.pth", "pkg/test_util.py"]
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
    for bad in (["PASSED t.py::a", "PASSED t.py::b"],                      # a P2P test missing
                ["PASSED t.py::a", "PASSED t.py::b", "SKIPPED t.py::c"],  # skipped
                ["ERROR t.py::a", "PASSED t.py::b", "PASSED t.py::c"],    # errored
                ["FAILED t.py::a - assert 1 == 2", "PASSED t.py::b", "PASSED t.py::c"]):
        v = resolve(INST, parse_log(log(bad)), 1)
        assert v["resolved"] is False and v["rejected"] == ""
    assert parse_log("PASSED t.py::a\n") == {}  # no markers, no results
    v = resolve(INST, parse_log(log(["FAILED t.py::a - x", "PASSED t.py::b"])), 1)
    assert v["tests"] == {"t.py::a": "FAILED", "t.py::b": "PASSED", "t.py::c": "MISSING"}
    assert v["FAIL_TO_PASS"] == {"passed": 0, "total": 1} and v["PASS_TO_PASS"] == {"passed": 1, "total": 2}


def _new_file_patch(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{ln}\n" for ln in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def test_test_patch_is_applied_only_in_the_grading_workspace(tmp_path, need) -> None:
    need("process")
    inst = next(i for i in read_instances(SHIPPED)
                if i.repo == "pytoolz/toolz" and "[" not in i.FAIL_TO_PASS[0] and i.FAIL_TO_PASS[0].count("::") == 1)
    path, func = inst.FAIL_TO_PASS[0].split("::")
    module = path.removesuffix(".py").replace("/", ".")
    new_test = "toolz/tests/test_argym_hidden.py"
    patch = _new_file_patch(new_test, f"from {module} import {func} as check\n\n\ndef test_hidden():\n    check()\n")
    hidden = dataclasses.replace(inst, instance_id=inst.instance_id + ".hidden", test_patch=patch,
                                 FAIL_TO_PASS=(*inst.FAIL_TO_PASS, f"{new_test}::test_hidden"))
    path = tmp_path / "hidden.jsonl"
    path.write_text(json.dumps(hidden.to_row()) + "\n")
    with argym.make("argym/SWE-v0", tasks=str(path), split="all").unwrapped as env:
        env.reset(seed=0)
        obs, *_ = env.step('<tool_call>{"name": "run", "arguments": {"command": "ls toolz/tests | grep -c hidden"}}'
                           '</tool_call>')
        assert obs[-1]["content"].splitlines()[-1] == "0"  # the agent never sees the test patch
        while True:
            obs, reward, term, trunc, info = env.step(env.oracle_action())
            if term or trunc:
                break
        assert reward == 1.0 and info["verdict"]["tests"][f"{new_test}::test_hidden"] == "PASSED", info["verdict"]
        env.reset(seed=0)
        obs, reward, *_, info = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
        assert reward == 0.0 and info["verdict"]["tests"][f"{new_test}::test_hidden"] == "FAILED"
