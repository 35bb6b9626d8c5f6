"""argym/Code-v0: task sources, code extraction, grading, multi-turn feedback (docs/design.md, "Env families").

The hostile-code cases live in tests/envs/sandbox/test_hostile.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import argym
from argym.envs.code.env import CodeEnv
from argym.envs.code.grader import extract_code, program_for
from argym.envs.code.tasks import code_task, code_tasks, functions_source, humaneval_source
from argym.envs.sandbox import SandboxError

CODE = "argym/Code-v0"

if shutil.which("bwrap") is None:
    pytestmark = pytest.mark.skipif(
        os.environ.get("CI") != "true", reason="bubblewrap is not installed (apt-get install bubblewrap)"
    )


class PassAgent:
    name = "pass"

    def act(self, messages, env):
        return "```python\npass\n```"


@pytest.fixture(scope="module")
def env():
    e = argym.make(CODE, max_attempts=2)
    yield e
    e.close()


# ---- tasks -----------------------------------------------------------------------
def test_humaneval_has_164_test_tasks_with_tests_and_solutions() -> None:
    src = humaneval_source()
    tasks = src.take("test", None)
    assert len(tasks) == 164 and src.take("train", None) == []
    t = src.get("HumanEval/0")
    assert t.meta["entry_point"] == "has_close_elements" and "def check(candidate)" in t.tests
    assert "def has_close_elements" in t.prompt[0]["content"] and t.answer.strip()
    assert "check(" not in t.prompt[0]["content"] and t.answer not in t.prompt[0]["content"]


def test_functions_source_splits_train_and_test_disjointly() -> None:
    src = functions_source(test_size=30)
    test = src.take("test", None)
    train = src.take("train", 200)
    assert len(test) == 30 and all(t.split == "test" for t in test)
    prompts = lambda ts: {t.prompt[0]["content"] for t in ts}  # noqa: E731
    assert not prompts(test) & prompts(train)
    assert src.get(train[5].id) == train[5] and "assert candidate(" in train[5].tests


def test_the_default_functions_source_holds_its_test_split() -> None:
    """`functions()` (and `configs/grpo_code.yaml`) must be able to evaluate: its default test_size is drawable."""
    assert len(code_tasks("functions()").take("test", None)) == 40


def test_jsonl_source(tmp_path) -> None:
    rows = [
        {
            "prompt": 'def sq(x):\n    """Square x."""\n',
            "tests": "def check(candidate):\n    assert candidate(3) == 9\n",
            "entry_point": "sq",
            "solution": "    return x * x\n",
            "split": "train",
        },
        {
            "id": "cube",
            "prompt": "def cube(x):\n",
            "tests": "def check(candidate):\n    assert candidate(2) == 8\n",
            "entry_point": "cube",
        },
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    src = code_tasks(str(path))
    assert [t.id for t in src.take("all", None)] == ["mine#1", "cube"]
    e = CodeEnv(tasks=str(path), split="train")
    e.reset(options={"task_id": "mine#1"})
    assert e.step(e.oracle_action())[1] == 1.0
    e.reset(options={"task_id": "cube"})
    assert e.step("def cube(x):\n    return x ** 3\n")[1] == 1.0  # plain code, no fence
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "def f(): pass", "tests": "assert True", "entry_point": "f"}) + "\n")
    with pytest.raises(argym.ConfigError, match="bad.jsonl:1"):
        code_tasks(str(bad))
    for tests, says in [
        ("def check(candidate):\n    assert True\n", "no assert that checks the candidate"),
        ("def check(candidate):\n    assert (\n", "not valid Python"),
    ]:
        bad.write_text(json.dumps({"prompt": "def f(): pass", "tests": tests, "entry_point": "f"}) + "\n")
        with pytest.raises(argym.ConfigError, match=f"bad.jsonl:1.*{says}"):
            code_tasks(str(bad))


# ---- extraction -------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, code",
    [
        ("```python\nx = 1\n```", "x = 1\n"),
        ("prose\n```py\na\n```\nmore\n```python\nb\n```", "b\n"),
        ("```\nbare\n```", "bare\n"),
        ("```python\nunclosed\n", "unclosed\n"),
        ("```bash\nls\n```", "```bash\nls\n```"),
        ("def f(): return 1", "def f(): return 1"),
    ],
)
def test_extract_code(text: str, code: str) -> None:
    assert extract_code(text) == code


def test_a_body_continues_the_stub_and_a_function_replaces_it() -> None:
    t = code_task(
        "t", 'import math\ndef f(x):\n    """Doc."""\n', "def check(candidate):\n    assert True\n", "f"
    )
    assert program_for(t, "    return x\n").endswith('"""Doc."""\n    return x\n')
    full = program_for(t, "def f(x):\n    return math.pi\n")
    assert full.startswith("import math") and full.endswith("def f(x):\n    return math.pi\n")


# ---- the env ----------------------------------------------------------------------
def test_oracle_pass_and_multi_turn_feedback(env) -> None:
    obs, info = env.reset(options={"task_id": "HumanEval/0"})
    assert info["split"] == "test" and obs[0]["role"] == "user"
    obs, reward, terminated, truncated, info = env.step("```python\n    return False\n```")
    assert (reward, terminated, truncated, info["success"]) == (0.0, False, False, False)
    v = info["verdict"]
    assert v["kind"] == "wrong_answer" and v["failed"] >= 1 and v["passed"] >= 1
    assert "assert candidate(" in v["message"] and obs[-1]["role"] == "user"
    assert obs[-1]["content"].startswith("A hidden test failed") and len(obs) == 3
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
    assert (reward, terminated, info["success"], info["reward_parts"]) == (1.0, True, True, {"outcome": 1.0})
    assert info["verdict"]["kind"] == "ok" and info["verdict"]["failed"] == 0


def test_last_failed_attempt_terminates_with_the_verdict(env) -> None:
    env.reset(options={"task_id": "HumanEval/2"})
    _, _, terminated, _, info = env.step("```python\n    return (\n```")
    assert not terminated and info["verdict"]["kind"] == "syntax_error"
    assert "does not parse" in env.unwrapped._messages[-1]["content"]
    _, reward, terminated, truncated, info = env.step("no code at all, just words")
    assert (reward, terminated, truncated) == (0.0, True, False) and info["verdict"]["kind"] in (
        "syntax_error",
        "no_code",
    )


@pytest.mark.parametrize(
    "answer, kind",
    [
        ("```python\n    raise ValueError('boom')\n```", "exception"),
        ("```python\n    return None\n```", "wrong_answer"),
        ("```python\n\n```", "no_code"),
        ("```python\ndef other(x):\n    return 1\n```", "wrong_answer"),  # the stub stays: returns None
    ],
)
def test_failure_kinds(answer: str, kind: str) -> None:
    e = CodeEnv(timeout_s=3.0)
    e.reset(options={"task_id": "HumanEval/4"})
    _, reward, terminated, _, info = e.step(answer)
    assert (reward, terminated, info["success"], info["verdict"]["kind"]) == (0.0, True, False, kind), info


def test_partial_credit_is_the_fraction_of_the_tasks_asserts_passed() -> None:
    tests = "def check(candidate):\n" + "".join(f"    assert candidate({x}) == {x}\n" for x in range(4))
    loop = "def check(candidate):\n    for x in range(4):\n        assert candidate(x) == x\n"
    e = CodeEnv(
        tasks=[code_task("p", "def f(x):\n", tests, "f"), code_task("loop", "def f(x):\n", loop, "f")],
        partial_credit=True,
    )
    e.reset(options={"task_id": "p"})
    _, reward, _, _, info = e.step("    return 0 if x < 1 else -1\n")
    v = info["verdict"]
    assert reward == 0.25 and not info["success"] and (v["passed"], v["failed"]) == (1, 3) and v["total"] == 4
    # an assert in a loop is one assert of the task, passed only if it holds on every iteration
    e.reset(options={"task_id": "loop"})
    _, reward, _, _, info = e.step("    return 0 if x < 1 else -1\n")
    v = info["verdict"]
    assert reward == 0.0 and (v["passed"], v["failed"]) == (0, 1) and v["total"] == 1


TEN = code_task(
    "ten",
    "def f(x):\n",
    "def check(candidate):\n" + "".join(f"    assert candidate({x}) == {x}\n" for x in range(10)),
    "f",
)


@pytest.mark.parametrize(
    "then, kind",
    [
        ("return -1", "wrong_answer"),
        ("import os\n    os._exit(0)", "exit"),  # was 3 of 4 asserts run: 0.75
        ("import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)", "crash"),
        ("while True:\n        pass", "timeout"),  # was 0.75 too
    ],
)
def test_partial_credit_does_not_depend_on_how_the_candidate_stops(then: str, kind: str) -> None:
    """Right on 3 calls of 10, then wrong, or dead: the same 3/10 (issue 15, finding 5)."""
    e = CodeEnv(tasks=[TEN], partial_credit=True, timeout_s=1.0)
    e.reset(options={"task_id": "ten"})
    _, reward, _, _, info = e.step(f"    if x < 3:\n        return x\n    {then}\n")
    v = info["verdict"]
    assert (reward, v["kind"], v["passed"]) == (0.3, kind, 3) and v["total"] == 10, v


def test_a_candidate_that_dies_at_once_earns_nothing_from_constant_asserts() -> None:
    """HumanEval/83's first assert is ``assert True``: a body of ``os._exit(0)`` scored 0.5 (1 of 2 run)."""
    e = CodeEnv(partial_credit=True, timeout_s=3.0)
    e.reset(options={"task_id": "HumanEval/83"})
    _, reward, _, _, info = e.step("```python\n    import os\n    os._exit(0)\n```")
    v = info["verdict"]
    assert (reward, v["kind"], v["passed"]) == (0.0, "exit", 0) and v["total"] == 5, v
    e.reset(options={"task_id": "HumanEval/83"})
    _, reward, _, _, info = e.step(e.oracle_action())
    assert (reward, info["success"], info["verdict"]["passed"]) == (1.0, True, 5)


def test_an_assert_the_candidate_steers_around_is_not_passed() -> None:
    """Tests whose flow depends on the candidate's answers: an assert skipped is not a pass (was: success)."""
    tests = "def check(candidate):\n    assert candidate(0) == 0\n    if candidate(5) == 5:\n        assert candidate(1) == 2\n"
    e = CodeEnv(tasks=[code_task("steer", "def f(x):\n", tests, "f")], partial_credit=True, max_attempts=2)
    e.reset(options={"task_id": "steer"})
    obs, reward, terminated, _, info = e.step("    return 0 if x == 0 else -1\n")
    v = info["verdict"]
    assert (reward, info["success"], v["kind"], v["passed"]) == (0.0, False, "ok", 1) and v["total"] == 2, v
    assert obs[-1]["content"].startswith("Not every hidden test ran. 1 of 2 hidden tests did not pass;")
    _, reward, _, _, info = e.step("    return x if x < 5 else 5\n")
    assert (reward, info["verdict"]["kind"], info["verdict"]["passed"]) == (0.5, "wrong_answer", 1)


def test_counted_asserts_come_from_the_test_source() -> None:
    from argym.envs.sandbox.pyharness_asserts import counted_asserts

    src = (
        "assert len([1]) == 1\ndef check(candidate):\n    assert True, 'free'\n    for x in range(3):\n"
        "        assert candidate(x)\n    def inner():\n        assert candidate(0) == 0, 'msg'\n    inner()\n"
    )
    assert counted_asserts(src) == ["1:0", "5:8", "7:8"]


SECRET_TASK = code_task(
    "secret",
    "def f(x):\n",
    "def check(candidate):\n    assert candidate(13579) == 987654321\n    assert candidate(2) == 4\n",
    "f",
)


@pytest.mark.parametrize(
    "body, says",
    [
        ("return 0", "first failure: AssertionError (a wrong result)"),
        ("raise ValueError(x, 'expected?')", "first failure: ValueError raised by your code"),
        # the candidate names its own exception class after its input: the name is not repeated
        ("raise type(f'Seen_{x}', (Exception,), {})()", "first failure: an exception raised by your code"),
        ("print(x)\n    while True:\n        pass", "first failure: time limit exceeded"),
    ],
)
def test_summary_feedback_reveals_no_hidden_test(body: str, says: str) -> None:
    """The default feedback says what failed, never a test's line, input or expected value (issue 15, finding 6)."""
    e = CodeEnv(tasks=[SECRET_TASK], max_attempts=2, timeout_s=1.0)
    e.reset(options={"task_id": "secret"})
    obs, reward, terminated, _, info = e.step(f"    {body}\n")
    text = obs[-1]["content"]
    assert not terminated and "2 of 2 hidden tests did not pass" in text and says in text, text
    for secret in ("987654321", "13579", "assert", "candidate", "line"):
        assert secret not in text, text
    assert (
        "987654321" in info["verdict"]["message"] or info["verdict"]["kind"] != "wrong_answer"
    )  # info keeps it
    assert e.feedback == "summary"  # the default


def test_full_feedback_quotes_the_failing_assert_when_asked() -> None:
    e = CodeEnv(tasks=[SECRET_TASK], max_attempts=2, feedback="full")
    e.reset(options={"task_id": "secret"})
    obs, *_ = e.step("    return 0\n")
    assert "line 2: assert candidate(13579) == 987654321" in obs[-1]["content"]
    assert obs[-1]["content"].startswith("A hidden test failed (0 of 2 tests passed).")
    with pytest.raises(argym.ConfigError, match="feedback must be one of 'summary', 'full'"):
        CodeEnv(tasks=[SECRET_TASK], feedback="verbose")


def test_a_sandbox_fault_is_an_infrastructure_failure() -> None:
    class Broken:
        backend = "broken"
        limits = argym.envs.sandbox.Limits()

        def run(self, *a, **k):
            raise SandboxError("no sandbox today")

    from argym.envs.executors import Executors

    e = CodeEnv(executors=Executors(sandbox=Broken()))
    e.reset(options={"task_id": "HumanEval/0"})
    _, reward, terminated, _, info = e.step(e.oracle_action())
    assert (reward, terminated, info["infra_failure"], info["verdict"]["kind"]) == (
        0.0,
        True,
        True,
        "infra_failure",
    )


def test_snapshot_restore_replays_the_verdicts(env) -> None:
    env.reset(options={"task_id": "HumanEval/0"})
    env.step("```python\n    return False\n```")
    state = env.unwrapped.snapshot()
    fresh = CodeEnv(max_attempts=2)
    fresh.restore(state)
    assert fresh._messages == env.unwrapped._messages and fresh.turn == 1


def test_procedural_oracle_and_pass_agent() -> None:
    from argym.agents.evaluate import evaluate

    kw = {"tasks": "functions(test_size=20)"}
    assert evaluate(CODE, kw, "oracle").mean == 1.0
    assert evaluate(CODE, kw, PassAgent(), agent_spec="pass").mean == 0.0
    assert evaluate(CODE, {**kw, "split": "train"}, "oracle", episodes=10).mean == 1.0


@pytest.mark.slow
@pytest.mark.full(reason="CI: the oracle on 5 test and 10 train tasks (above and below)")
def test_humaneval_oracle_is_164_of_164_and_pass_is_0() -> None:
    from argym.agents.evaluate import evaluate

    r = evaluate(CODE, {}, "oracle")
    assert (r.n, r.mean, r.infra_failures) == (164, 1.0, 0)
    r = evaluate(CODE, {}, PassAgent(), agent_spec="pass")
    assert (r.n, r.mean) == (164, 0.0)


def test_cli_eval_oracle_smoke() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "argym.cli", "eval", CODE, "--agent", "oracle", "--episodes", "5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "1.000" in out.stdout


def test_a_real_sandbox_whose_bubblewrap_fails_is_an_infrastructure_failure(broken_bwrap_sandbox) -> None:
    e = CodeEnv(sandbox=broken_bwrap_sandbox)
    e.reset(options={"task_id": "HumanEval/0"})
    _, reward, terminated, _, info = e.step(e.oracle_action())
    assert (reward, terminated, info["infra_failure"], info["verdict"]["kind"]) == (
        0.0,
        True,
        True,
        "infra_failure",
    )
    assert "bubblewrap failed" in info["verdict"]["message"]


def test_a_harness_that_fails_before_the_program_runs_is_an_infrastructure_failure(
    harness_fault_sandbox,
) -> None:
    # bubblewrap ran the command and reports its exit code, so only the harness's missing ready line tells
    # this from a program that killed the harness (which is scored: tests/envs/sandbox/test_hostile.py)
    e = CodeEnv(sandbox=harness_fault_sandbox)
    e.reset(options={"task_id": "HumanEval/0"})
    _, reward, terminated, _, info = e.step(e.oracle_action())
    assert (reward, terminated, info["infra_failure"], info["verdict"]["kind"]) == (
        0.0,
        True,
        True,
        "infra_failure",
    )
    assert "the test harness stopped before the program ran" in info["verdict"]["message"]
