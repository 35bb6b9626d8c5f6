"""Harness faults of argym/SWE-v0 are infrastructure failures or clear errors, never a reward of 0:
the sandbox's test environment removed under a live episode, and pytest or swebench missing from the install."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import argym
from argym.envs.swe.project import cache_root

SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


def test_a_removed_test_environment_is_an_infrastructure_failure_then_rebuilt(need) -> None:
    need("process")
    env = argym.make("argym/SWE-v0", split="test", max_turns=12).unwrapped
    try:
        env.reset(seed=0)
        task = env.task.id
        shutil.rmtree(cache_root() / "testenv")  # what bwrap then cannot bind: a tool call fails
        _, reward, term, _, info = env.step(env.oracle_action())
        assert (reward, term, info["infra_failure"]) == (0.0, True, True), info["verdict"]
        assert "Can't find source path" in info["verdict"]["infra_failure"]

        env.reset(options={"task_id": task})  # rebuilt; now the grader's diff cannot run
        shutil.rmtree(cache_root() / "testenv")
        _, reward, term, _, info = env.step(SUBMIT)
        assert (reward, term, info["infra_failure"]) == (0.0, True, True), info["verdict"]
        assert info["verdict"].get("patch") != "unreadable"

        env.reset(options={"task_id": task})
        while True:
            _, reward, term, trunc, info = env.step(env.oracle_action())
            if term or trunc:
                break
        assert reward == 1.0 and info["success"] and not info["infra_failure"], info["verdict"]
    finally:
        env.close()


NO_PYTEST = """
import json, sys
import argym
env = argym.make("argym/SWE-v0", split="test").unwrapped
env.sandbox  # the sandbox starts with the full install
sys.path[:] = [p for p in sys.path if "site-packages" not in p]  # an install without pytest
try:
    env.reset(seed=0)
    print(json.dumps({"error": None}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


def test_without_pytest_reset_names_the_swe_extra(need, tmp_path) -> None:
    need("process")
    out = subprocess.run(
        [sys.executable, "-c", NO_PYTEST], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["error"] == "MissingDependencyError", (got, out.stderr[-2000:])
    assert "pytest" in got["message"] and "pip install 'argym[swe]'" in got["message"]


NO_SWEBENCH = """
import json, sys
import argym, argym.envs.swe.env
sys.path[:] = [p for p in sys.path if "site-packages" not in p]  # an install without the swe extra
try:
    argym.make("argym/SWE-v0")
    print(json.dumps({"error": None}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""


def test_without_swebench_make_names_the_swe_extra(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", NO_SWEBENCH], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["error"] == "MissingDependencyError", (got, out.stderr[-2000:])
    assert "swebench" in got["message"] and "pip install 'argym[swe]'" in got["message"]


def test_a_lost_container_is_an_infrastructure_failure(need) -> None:
    """The docker backend's container is removed under a live episode (the engine restarted, an operator's
    cleanup): the next tool call, and the grader's diff, are infrastructure failures."""
    need("docker")
    env = argym.make("argym/SWE-v0", split="test", sandbox="docker", max_turns=12).unwrapped
    try:
        for action in (None, SUBMIT):
            env.reset(seed=0)
            env._ws.box.remove(force=True)
            _, reward, term, _, info = env.step(action or env.oracle_action())
            assert (reward, term, info["infra_failure"]) == (0.0, True, True), info["verdict"]
    finally:
        env.close()
