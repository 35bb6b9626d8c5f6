"""BFCL through argym/ToolCall-v0: the oracle scores 100% per category, perturbed answers score 0, and argym's
checker agrees with bfcl_eval's own AST checker (imported from the fetched wheel, without its heavy dependencies).

Needs `argym data fetch bfcl` (the Makefile's test target runs it). CI checks the first tasks of every
category; ARGYM_TEST_FULL=1 (`make test-full`) checks every task.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import types

import pytest

import argym
from argym.envs.toolcall import bfcl
from argym.envs.toolcall.bfcl_checker import check_calls
from argym.envs.tools.calls import ToolCall, format_calls

FULL = os.environ.get("ARGYM_TEST_FULL") == "1"
PER_CATEGORY = None if FULL else 60
CATEGORIES = list(bfcl.CATEGORIES)


@pytest.fixture(scope="module", autouse=True)
def bfcl_data():
    try:
        return bfcl.data_dir()
    except argym.ConfigError as e:
        pytest.fail(f"{e} (the Makefile's test target does this)")


def _tasks(category: str):
    tasks = bfcl.load_category(category)
    return list(tasks[:PER_CATEGORY]) if PER_CATEGORY else list(tasks)


def _step(env, task, action):
    env.reset(options={"task": task})
    return env.step(action)


@pytest.mark.parametrize("category", CATEGORIES)
def test_oracle_scores_100_percent_per_category(category):
    env = argym.make("argym/ToolCall-v0", tasks=f"bfcl/{category}")
    assert len(env.unwrapped.tasks.tasks) == len(bfcl.load_category(category)) >= 16
    for i, task in enumerate(_tasks(category)):
        env.unwrapped.oracle_style = ("hermes", "json", "openai")[i % 3]
        env.reset(options={"task": task})
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
        assert (reward, terminated, info["success"]) == (1.0, True, True), (task.id, info["verdict"])
        assert info["verdict"]["category"] == category and info["verdict"]["check"] == "ok"


def _perturbations(task):
    """(name, calls) pairs that must all score 0: wrong value, missing required argument, wrong function, extra call."""
    calls = bfcl.oracle_calls(task)
    if not calls:  # irrelevance: any call is wrong
        fn = task.meta["functions"][0]["name"] if task.meta["functions"] else "lookup"
        return [("a call", [(fn, {})])]
    out = [
        ("wrong function", [(calls[0][0] + "_other", calls[0][1])] + calls[1:]),
        ("extra call", calls + [calls[0]]),
    ]
    docs = {f["name"]: f for f in task.meta["functions"]}
    name, args = calls[0]
    required = [p for p in (docs[name]["parameters"].get("required") or []) if p in args]
    if required:
        fewer = {k: v for k, v in args.items() if k != required[0]}
        out.append(("missing required argument", [(name, fewer)] + calls[1:]))
    if args:
        param = sorted(args)[0]
        wrong = dict(args)
        wrong[param] = _wrong(args[param])
        out.append(("wrong value", [(name, wrong)] + calls[1:]))
    return out


def _wrong(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 7919
    if isinstance(value, str):
        return value + " qzx"
    if isinstance(value, list):
        return value + ["qzx"] if value else ["qzx"]
    if isinstance(value, dict):
        return {**value, "qzx": "qzx"}
    return "qzx"


@pytest.mark.parametrize("category", CATEGORIES)
def test_perturbed_answers_score_zero(category):
    env = argym.make("argym/ToolCall-v0", tasks=f"bfcl/{category}")
    for task in _tasks(category):
        for what, calls in _perturbations(task):
            action = format_calls([ToolCall(n, a, f"c{i}") for i, (n, a) in enumerate(calls)], "hermes")
            _, reward, terminated, _, info = _step(env, task, action)
            assert (reward, terminated, info["success"]) == (0.0, True, False), (task.id, what, calls)


def test_irrelevance_wants_no_call_and_unreadable_calls_fail():
    task = bfcl.load_category("irrelevance")[0]
    env = argym.make("argym/ToolCall-v0", tasks="bfcl/irrelevance")
    assert _step(env, task, "I cannot help with that using these tools.")[4]["success"]
    task = bfcl.load_category("simple")[0]
    _, reward, _, _, info = _step(env, task, '{"name": "calculate_triangle_area", "arguments": {"base": 10,')
    assert reward == 0.0 and "could not be read" in info["verdict"]["check"]


def test_int_is_accepted_for_float_but_not_bool_for_int():
    fn = {
        "name": "f",
        "parameters": {
            "type": "dict",
            "required": ["x", "n"],
            "properties": {"x": {"type": "float"}, "n": {"type": "integer"}},
        },
    }
    truth = [{"f": {"x": [2.0], "n": [3]}}]
    assert check_calls([fn], [("f", {"x": 2, "n": 3})], truth).valid
    assert not check_calls([fn], [("f", {"x": 2.0, "n": True})], truth).valid
    assert not check_calls([fn], [("f", {"x": 2.0, "n": 3.0})], truth).valid


def test_parallel_calls_match_in_any_order_and_strings_loosely():
    fn = {
        "name": "w",
        "parameters": {"type": "dict", "required": ["city"], "properties": {"city": {"type": "string"}}},
    }
    truth = [{"w": {"city": ["New York, NY"]}}, {"w": {"city": ["Paris"]}}]
    assert check_calls([fn], [("w", {"city": "paris"}), ("w", {"city": "new york ny"})], truth).valid
    assert not check_calls([fn], [("w", {"city": "Paris"}), ("w", {"city": "Paris"})], truth).valid


def test_tasks_carry_json_schema_tools():
    task = bfcl.load_category("simple")[0]
    params = task.tools[0]["function"]["parameters"]
    assert params["type"] == "object" and task.meta["functions"][0]["parameters"]["type"] == "dict"
    env = argym.make("argym/ToolCall-v0", tasks="bfcl/simple")
    obs, _ = env.reset(options={"task": task})
    assert (
        obs[0]["role"] == "system"
        and '"calculate_triangle_area"' in obs[0]["content"]
        and obs[1]["role"] == "user"
    )


def test_bfcl_sources_and_the_unsatisfiable_entries():
    src = bfcl.bfcl_source(["simple", "live_simple"], per_category=3)
    assert [t.id for t in src.tasks] == [
        "simple_python_0",
        "simple_python_1",
        "simple_python_2",
        "live_simple_0-0-0",
        "live_simple_1-1-0",
        "live_simple_2-2-0",
    ]
    ids = {t.id for c in CATEGORIES for t in bfcl.load_category(c)}
    assert not ids & bfcl.UNSATISFIABLE
    with pytest.raises(argym.ConfigError, match="Unknown BFCL category 'weird'"):
        argym.make("argym/ToolCall-v0", tasks="bfcl/weird")


def test_missing_data_names_the_setup_command(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGYM_CACHE", str(tmp_path))
    bfcl.load_category.cache_clear()
    try:
        with pytest.raises(argym.ConfigError, match="argym data fetch bfcl"):
            argym.make("argym/ToolCall-v0", tasks="bfcl/simple")
    finally:
        bfcl.load_category.cache_clear()


def test_cli_fetch_unpacks_the_wheel_and_eval_reports_the_oracle(tmp_path):
    wheel = next((bfcl.cache_dir() / "wheels").glob(f"bfcl_eval-{bfcl.BFCL_VERSION}-*.whl"), None)
    env = {**os.environ, "ARGYM_CACHE": str(tmp_path), "ARGYM_LEADERBOARD": str(tmp_path / "lb.sqlite")}
    if wheel is not None:  # reuse the downloaded wheel: no network in the test
        (tmp_path / "wheels").mkdir()
        shutil.copy(wheel, tmp_path / "wheels")
    argym_cli = [sys.executable, "-m", "argym.cli"]
    out = subprocess.run(
        [*argym_cli, "data", "fetch", "bfcl"], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert (
        tmp_path / "bfcl" / bfcl.BFCL_VERSION / "bfcl_eval" / "data" / "BFCL_v4_simple_python.json"
    ).is_file()
    out = subprocess.run(
        [
            *argym_cli,
            "eval",
            "argym/ToolCall-v0",
            "tasks=bfcl/parallel",
            "--agent",
            "oracle",
            "--episodes",
            "10",
            "--out",
            str(tmp_path / "r.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert (
        result["n"] == 10
        and result["mean"] == 1.0
        and result["grader_versions"]["bfcl-eval"] == bfcl.BFCL_VERSION
    )
    assert len(result["grader_versions"]["argym-bfcl-checker"]) == 12


# ---- against bfcl_eval's own checker -----------------------------------------------------------------


@pytest.fixture(scope="module")
def bfcl_ast_checker():
    """bfcl_eval's ast_checker module, from the fetched package tree; its one heavy import (the model registry,
    used only to rename dotted function names for some API models) is replaced by a registry that renames nothing."""
    root = str(bfcl.bfcl_root().parent)
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = type(
        "NoRenaming",
        (dict,),
        {"__missing__": lambda self, key: types.SimpleNamespace(underscore_to_dot=False)},
    )()
    saved = {k: v for k, v in sys.modules.items() if k.startswith("bfcl_eval")}
    sys.path.insert(0, root)
    sys.modules["bfcl_eval.constants.model_config"] = stub
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval import ast_checker

        assert ast_checker.__file__.startswith(root)
        yield ast_checker, Language.PYTHON
    finally:
        sys.path.remove(root)
        for k in [k for k in sys.modules if k.startswith("bfcl_eval")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _bfcl_verdict(checker, language, task, calls) -> bool:
    truth = task.meta["ground_truth"]
    if truth is None:  # BFCL grades irrelevance by "no call decoded", outside the AST checker
        return not calls
    output = [{name: copy.deepcopy(args)} for name, args in calls]
    result = checker.ast_checker(
        task.meta["functions"],
        output,
        copy.deepcopy(truth),
        language,
        bfcl.CATEGORIES[task.meta["category"]],
        "argym",
    )
    return bool(result["valid"])


@pytest.mark.parametrize("category", [c for c in CATEGORIES if c not in bfcl.IRRELEVANCE])
def test_verdicts_agree_with_bfcl_eval(bfcl_ast_checker, category):
    checker, language = bfcl_ast_checker
    compared = 0
    for task in _tasks(category):
        for what, calls in [("oracle", bfcl.oracle_calls(task))] + _perturbations(task):
            ours = check_calls(task.meta["functions"], calls, task.meta["ground_truth"]).valid
            assert ours == _bfcl_verdict(checker, language, task, calls), (task.id, what, calls)
            compared += 1
    assert compared >= 4 * min(16, len(_tasks(category)))


def test_unsatisfiable_entries_fail_bfcl_eval_too(bfcl_ast_checker):
    checker, language = bfcl_ast_checker
    data = bfcl.data_dir()
    for task_id in sorted(bfcl.UNSATISFIABLE):
        category = task_id.rsplit("_", 1)[0]
        stem = bfcl.CATEGORIES[category]
        row = next(json.loads(ln) for ln in (data / f"BFCL_v4_{stem}.json").open() if f'"{task_id}"' in ln)
        truth = next(
            json.loads(ln)["ground_truth"]
            for ln in (data / "possible_answer" / f"BFCL_v4_{stem}.json").open()
            if f'"{task_id}"' in ln
        )
        task = argym.Task(
            id=task_id,
            prompt=(),
            meta={"functions": row["function"], "ground_truth": truth, "category": category},
        )
        calls = bfcl.oracle_calls(task)
        assert not _bfcl_verdict(checker, language, task, calls), task_id
        assert not check_calls(row["function"], calls, truth).valid
