"""argym/SWE-v0 end to end on both backends: the oracle resolves the shipped instances (a representative sample;
all of them with ARGYM_TEST_FULL=1), and agents that submit nothing, edit or delete the tests, steer pytest or
fake its log resolve none; no future history is reachable; snapshots are real copies."""

from __future__ import annotations

import json
import pickle
import shlex

import pytest
from gymnasium.utils.env_checker import check_env

import argym
from argym.envs.swe.instances import instance_of

SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


def run(command: str) -> str:
    return f"<tool_call>{json.dumps({'name': 'run', 'arguments': {'command': command}})}</tool_call>"


def play_oracle(env, task_id: str):
    env.reset(options={"task_id": task_id})
    while True:
        obs, reward, term, trunc, info = env.step(env.oracle_action())
        if term or trunc:
            return reward, info


def submit_after(env, task_id: str, *actions: str):
    env.reset(options={"task_id": task_id})
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        assert not (term or trunc), obs[-1]
    obs, reward, term, trunc, info = env.step(SUBMIT)
    assert term and not trunc
    return reward, info


def test_oracle_resolves_the_sample(env, sample) -> None:
    ids = sample
    assert len({i.split("-")[0] for i in ids}) >= 3  # every project is represented
    for task_id in ids:
        reward, info = play_oracle(env, task_id)
        v = info["verdict"]
        assert reward == 1.0 and info["success"], (task_id, v)
        assert v["FAIL_TO_PASS"]["passed"] == v["FAIL_TO_PASS"]["total"] > 0
        assert set(v["tests"].values()) == {"PASSED"} and v["auto_submitted"] is False


def test_null_agent_resolves_nothing(env, sample) -> None:
    for task_id in sample[:1]:
        reward, info = submit_after(env, task_id)
        v = info["verdict"]
        assert reward == 0.0 and not info["success"] and v["patch"] == "empty"
        assert v["FAIL_TO_PASS"]["passed"] == 0


def _f2p_files(env, task_id):
    inst = instance_of(env.tasks.get(task_id))
    return inst, sorted({t.split("::")[0] for t in inst.FAIL_TO_PASS})


def test_editing_the_tests_to_pass_resolves_nothing(env, sample) -> None:
    task_id = next(i for i in sample if i.startswith("pytoolz"))  # its failing tests fail by assert
    inst, files = _f2p_files(env, task_id)
    neuter = "; ".join(f"sed -i -E 's/^( *)assert /\\1assert True or /' {shlex.quote(f)}" for f in files)
    env.reset(options={"task_id": task_id})
    obs, *_ = env.step(run(neuter))
    tests = " ".join(shlex.quote(t) for t in inst.FAIL_TO_PASS)
    obs, *_ = env.step(run(f"python3 -m pytest -q -p no:cacheprovider {tests} 2>&1 | tail -1"))
    assert (
        "passed" in obs[-1]["content"] and "failed" not in obs[-1]["content"]
    )  # the attack works in the workspace
    obs, reward, term, trunc, info = env.step(SUBMIT)
    assert (
        reward == 0.0
        and set(files) <= set(info["verdict"]["ignored_files"])
        and info["verdict"]["patch"] == "empty"
    )


def test_deleting_the_failing_tests_resolves_nothing(env, sample) -> None:
    task_id = sample[0]
    inst, files = _f2p_files(env, task_id)
    reward, info = submit_after(env, task_id, run("git rm -q " + " ".join(files)))
    assert reward == 0.0 and info["verdict"]["FAIL_TO_PASS"]["passed"] == 0


def test_a_conftest_that_passes_everything_is_ignored(penv, sample) -> None:
    env = penv  # grading is backend-independent code: the process backend suffices
    hook = (
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    out = yield\n    r = out.get_result()\n    r.outcome = 'passed'\n"
    )
    create = json.dumps({"name": "create", "arguments": {"path": "conftest.py", "file_text": hook}})
    reward, info = submit_after(env, sample[0], f"<tool_call>{create}</tool_call>")
    assert reward == 0.0 and "conftest.py" in info["verdict"]["ignored_files"]


def test_a_log_faking_passes_with_a_failing_exit_is_rejected(penv, sample) -> None:
    env = penv
    task_id = next(i for i in sample if i.startswith("pytoolz"))
    inst = instance_of(env.tasks.get(task_id))
    # printed after pytest's own summary, so these lines win in the parser's map; but pytest reported those
    # tests FAILED first (and the real failures exit 1, as the grader's must-fail sentinel always makes it)
    lines = "".join(f"PASSED {t}\\n" for t in (*inst.FAIL_TO_PASS, *inst.PASS_TO_PASS))
    fake = f"import atexit\natexit.register(lambda: print('{lines}'))\n"
    create = json.dumps(
        {"name": "run", "arguments": {"command": f"cat >> toolz/__init__.py <<'EOF'\n{fake}EOF"}}
    )
    reward, info = submit_after(env, task_id, f"<tool_call>{create}</tool_call>")
    v = info["verdict"]
    assert (
        reward == 0.0 and v["tampered"] and "two different statuses" in v["rejected"] and v["exit_code"] == 1
    )
    assert set(v["tests"].values()) == {"PASSED"}  # the parser believed the log; the exit code did not


def test_no_future_history_is_reachable(env, sample) -> None:
    task_id = sample[0]
    inst = instance_of(env.tasks.get(task_id))
    env.reset(options={"task_id": task_id})
    obs, *_ = env.step(
        run(
            "git log --all --format=%H; git tag; git reflog | wc -l; git remote; git stash list; "
            "git count-objects -v | grep -c '^packs: 0'; git rev-list --all | wc -l"
        )
    )
    out = obs[-1]["content"].splitlines()
    assert out == ["Exit code: 0", inst.base_commit, "1", "1", "1"]


def test_snapshot_is_a_real_copy_restored_into_a_fresh_env(env, sample) -> None:
    task_id = sample[0]
    env.reset(options={"task_id": task_id})
    env.step(env.oracle_action())  # the fix, as str_replace
    state = pickle.loads(pickle.dumps(env.get_wrapper_attr("snapshot")()))
    env.step(run("git stash -q"))  # the original workspace loses the fix after the snapshot
    other = argym.make("argym/SWE-v0", split="all", sandbox=env._sandbox_spec).unwrapped
    try:
        other.restore(state)
        assert other.turn == 1 and other._observation() == state.messages
        obs, *_ = other.step(run("git diff --stat | tail -1"))
        assert "1 file changed" in obs[-1]["content"]
        obs, reward, term, trunc, info = other.step(SUBMIT)
        assert reward == 1.0
    finally:
        other.close()
    obs, reward, term, trunc, info = env.step(SUBMIT)
    assert reward == 0.0  # the original went on from its own (stashed) state


def test_every_call_form_works(sample, need) -> None:
    need("process")
    task_id = sample[0]
    for style in ("openai", "json"):
        with argym.make("argym/SWE-v0", split="all", oracle_style=style).unwrapped as e:
            e.reset(options={"task_id": task_id})
            action = e.oracle_action()
            assert isinstance(action, dict) == (style == "openai")
            reward, info = play_oracle(e, task_id)
            assert reward == 1.0, style


def test_turn_limit_grades_the_workspace_as_it_stands(sample, need) -> None:
    need("process")
    task_id = sample[0]
    with argym.make("argym/SWE-v0", split="all", max_turns=1).unwrapped as e:
        e.reset(options={"task_id": task_id})
        obs, reward, term, trunc, info = e.step(e.oracle_action())  # the fix, but no submit
        assert trunc and not term and reward == 1.0 and info["verdict"]["auto_submitted"] is True


def test_time_limit_grades_the_workspace_and_truncates(sample, need) -> None:
    need("process")
    with argym.make("argym/SWE-v0", split="all", time_limit_s=0.001).unwrapped as e:
        e.reset(options={"task_id": sample[0]})
        obs, reward, term, trunc, info = e.step(e.oracle_action())  # the fix; the clock runs out in the edit
        assert trunc and not term and reward == 1.0
        assert info["verdict"]["time_limit"] is True and info["verdict"]["auto_submitted"] is True


def test_check_env_and_bad_kwargs(need) -> None:
    need("process")
    with argym.make("argym/SWE-v0", max_turns=3).unwrapped as e:
        check_env(e, skip_render_check=True)
    with pytest.raises(argym.ConfigError):
        argym.make("argym/SWE-v0", command_timeout_s=0)
    with pytest.raises(argym.ConfigError):
        argym.make("argym/SWE-v0", sandbox="vm")


def test_the_env_takes_its_sandbox_from_its_executors_and_close_releases_its_own(need, sample) -> None:
    need("process")
    from argym.envs.executors import Executors
    from argym.envs.swe.env import swe_sandbox

    env = argym.make("argym/SWE-v0", split="all", max_turns=2).unwrapped
    env.reset(options={"task_id": sample[0]})  # a workspace in the env's own sandbox
    own = env.sandbox
    assert own is swe_sandbox(env.executors, "process") and own._tmp.exists()
    env.close()
    assert not own._tmp.exists()  # made alone, the env built its sandbox and close() released it
    with Executors() as executors:
        shared = argym.make("argym/SWE-v0", split="all", executors=executors).unwrapped
        box = shared.sandbox
        assert box is swe_sandbox(executors, "process") and box is not own
        shared.close()
        assert box._tmp.exists()  # the executors' owner (an engine; here the test) closes it, not the env
    assert not box._tmp.exists()
