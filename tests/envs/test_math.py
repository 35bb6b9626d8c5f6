"""argym/Math-v0: the verifier, the task sources and the env (docs/design.md, "Env families")."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np
import pytest

import argym
from argym.envs.executors import Executors, WorkerPool
from argym.envs.math.arithmetic import arithmetic_source, evaluate
from argym.envs.math.env import RETRY_MESSAGE, MathEnv, math_tasks
from argym.envs.math.verifier import (
    GRADE_FN,
    RULES_VERSION,
    MathVerifier,
    _last_boxed,
    extract_answer,
    verifier_pool,
)

MATH = "argym/Math-v0"
DEADLINE_S = 2.0  # the bad-input tests' pool deadline: math-verify's own timeout is then 1 s


@pytest.fixture(scope="module")
def executors():
    """One verifier pool for the env tests that are not about who owns it (a pool per env: a worker start each)."""
    with Executors() as shared:
        yield shared


@pytest.fixture(scope="module")
def verifier(executors: Executors) -> MathVerifier:
    return MathVerifier(executors.verifier)


@pytest.fixture(scope="module")
def fast_executors():
    """A one-worker pool with a short deadline, so that timeout cases stay quick."""
    pool = verifier_pool(workers=1, deadline_s=DEADLINE_S)
    yield Executors(verifier=pool)
    pool.close()


def boxed(s: str) -> str:
    return f"The answer is \\boxed{{{s}}}."


# ---- extraction ---------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ("\\boxed{42}", "42"),
        ("so \\boxed{ 7 } done", "7"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("first \\boxed{1} then \\boxed{2}", "2"),  # the last one
        ("\\boxed{\\boxed{5}}", "5"),  # nested: the inner box
        ("\\boxed{3} and then \\boxed{4", "3"),  # unterminated last: the earlier one
        ("\\boxed{", None),
        ("\\boxed{{1}", None),  # unbalanced
        ("no box here: 42", None),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces are literal
        ("\\boxed {x^{2}}", "x^{2}"),
        ("\\boxed{" + "1" * 1001 + "}", None),  # longer than 1000 chars
        ("\\boxed{1}" + " " * 20_000, None),  # only the last 10k chars are read
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_extract_answer_is_linear_on_adversarial_input() -> None:
    t0 = time.perf_counter()
    assert _last_boxed("\\boxed{" * 200_000) is None  # 1.4 MB of unterminated boxes
    assert _last_boxed("{" * 500_000 + "\\boxed{1}" + "}" * 500_000) == "1"
    assert extract_answer("{" * 4000 + "\\boxed{1}" + "}" * 4000) == "1"
    assert time.perf_counter() - t0 < 2.0


# ---- equivalence --------------------------------------------------------------
@pytest.mark.parametrize(
    "gold, answer",
    [
        ("0.5", "\\frac{1}{2}"),
        ("1/2", "0.5"),
        ("10", "10.0"),
        ("x+1", "1+x"),
        ("\\frac{3}{4}", "6/8"),
        ("1000", "1,000"),
        ("$\\dfrac{79}{173}$", "79/173"),
        ("-4", " -4 "),
        ("2x", "2 \\cdot x"),
    ],
)
def test_equivalent(verifier: MathVerifier, gold: str, answer: str) -> None:
    assert verifier.check(gold, boxed(answer)) == {
        "parsed": answer.strip(),
        "correct": True,
        "reason": "verified",
    }


@pytest.mark.parametrize(
    "gold, answer",
    [
        ("3", "4"),
        ("-5", "5"),
        ("x+1", "x-1"),
        ("\\frac{1}{2}", "2"),
        ("2021", "\\pm 2021"),
        ("7", ""),
    ],
)
def test_not_equivalent(verifier: MathVerifier, gold: str, answer: str) -> None:
    v = verifier.check(gold, boxed(answer))
    assert (v["correct"], v["reason"]) == (False, "mismatch")


# An answer that restates the question's expression is not an answer: math-verify compares values, so
# before `verifier._stated` SmolLM2 learned "76 * 66 is \\boxed{}" on mixed arithmetic within 9 GRPO steps.
RESTATED = [
    ("5016", "76 * 66"),
    ("5016", "76 \\times 66"),
    ("-48", "31 - 79"),
    ("129", "75+54"),
    ("1563", "12 + 47 * 33"),
    ("6", "2 \\cdot 3"),
    ("8", "2^{3}"),
    ("7", "84/12"),
    ("7", "\\frac{84}{12}"),
    ("7", "84 \\div 12"),
    ("-48", "-48 = 31 - 79"),
]


@pytest.mark.parametrize("gold, answer", RESTATED)
def test_a_restated_question_is_not_the_answer(verifier: MathVerifier, gold: str, answer: str) -> None:
    v = verifier.check(gold, boxed(answer))
    assert (v["correct"], v["reason"]) == (False, "mismatch")
    v = verifier.check(gold, f"What is it? {answer} is the answer", answer_format="final")
    assert (v["correct"], v["reason"]) == (False, "mismatch"), v


@pytest.mark.parametrize(
    "gold, answer",
    [("5016", "x = 5016"), ("-48", "31 - 79 = -48"), ("50", "50\\%"), ("0.5", "50\\%"), ("3/4", "0.75")],
)
def test_a_number_stated_as_an_equation_or_a_percentage_is_still_the_answer(
    verifier: MathVerifier, gold: str, answer: str
) -> None:
    assert verifier.check(gold, boxed(answer))["correct"] is True


def test_restating_an_arithmetic_question_scores_zero_in_the_env(executors: Executors) -> None:
    for ops in ("+", "-", "*"):
        for answer_format in ("boxed", "final"):
            env = gym.make(
                MATH,
                tasks=f"arithmetic(digits=2,ops={ops},terms=3)",
                answer_format=answer_format,
                executors=executors,
            )
            env.reset(seed=0)
            question = env.unwrapped.task.prompt[-1]["content"]
            expr = question.removeprefix("What is ").split("?")[0]
            _, reward, _, _, info = env.step(f"{expr} is \\boxed{{{expr}}}")
            assert (reward, info["verdict"]["reason"]) == (0.0, "mismatch"), (question, info["verdict"])
            env.reset(seed=0)
            assert env.step(env.unwrapped.oracle_action())[1] == 1.0
            env.close()


def test_unparseable_gold_is_an_infrastructure_error(verifier: MathVerifier) -> None:
    with pytest.raises(argym.InfrastructureError, match="gold answer"):
        verifier.check("", boxed("5"))


def test_verifier_timeout_is_the_candidates_failure() -> None:
    # A deadline below math-verify's own 1 s timeout: the parent kills the worker. The gold is an
    # expression: against a number, a power tower is not a number as written and is never compared.
    with WorkerPool(GRADE_FN, workers=1, deadline_s=0.5, warmup=("1", "1", 1)) as pool:
        v = MathVerifier(pool)
        t0 = time.perf_counter()
        assert v.check("x + 5", boxed("9^{9^{9^{9}}}")) == {
            "parsed": "9^{9^{9^{9}}}",
            "correct": False,
            "reason": "timeout",
        }
        assert time.perf_counter() - t0 < 0.5 + 2
        assert v.check("5", boxed("5"))["correct"]  # the replacement worker grades


# ---- bad input through env.step --------------------------------------------------
BAD_ACTIONS = [
    42,
    None,
    ["\\boxed{1}"],
    {"role": "user", "content": "\\boxed{1}"},
    {"content": 7},
    "",
    "\\boxed{" + "9" * 1_000_000 + "}",
    "x" * 1_000_000,
    "\\boxed{" * 200_000,
    "\\boxed{" + "1" * 5000 + "}",
    "\\boxed{",
    "\\boxed{\\boxed{\\boxed{}}}",
    "\\boxed{9^{9^{9^{9}}}}",
    "\\boxed{2^{2^{40}}}",
    "\\boxed{" + "{" * 400 + "1" + "}" * 400 + "}",
    "\\boxed{\\frac{\\frac{\\frac{1}{0}}{0}}{0}}",
    "\\boxed{" + "+".join(f"\\sin({i}x)" for i in range(60)) + "}",
    "\\boxed{\x00\udcff\u202e}",
]


@pytest.mark.parametrize("action", BAD_ACTIONS, ids=lambda a: repr(a)[:30])
def test_bad_action_scores_zero_within_the_deadline(fast_executors: Executors, action) -> None:
    env = MathEnv(
        tasks=[argym.Task(id="t", prompt=({"role": "user", "content": "What is 2 + 3?"},), answer="5")],
        executors=fast_executors,
    )
    env.reset(options={"task_id": "t"})
    t0 = time.perf_counter()
    obs, reward, terminated, truncated, info = env.step(action)
    assert time.perf_counter() - t0 < DEADLINE_S + 2
    assert (reward, terminated, truncated, info["success"], info["infra_failure"]) == (
        0.0,
        True,
        False,
        False,
        False,
    )
    assert env.observation_space.contains(obs) and obs[-1]["role"] in ("assistant", "user")


def test_grader_fault_is_marked_infra_failure() -> None:
    # A pool whose function cannot take the grader's arguments: the grader raises.
    with WorkerPool("os:getpid", workers=1, deadline_s=5.0) as pool:
        env = MathEnv(executors=Executors(verifier=pool))
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step(env.oracle_action())
    assert (reward, terminated, info["infra_failure"], info["verdict"]["reason"]) == (
        0.0,
        True,
        True,
        "infra_failure",
    )


# ---- the arithmetic generator --------------------------------------------------
def test_arithmetic_prompt_and_answer() -> None:
    src = arithmetic_source(digits=2, ops="+", terms=2)
    assert src.name == "arithmetic(digits=2,ops=+,terms=2)"
    task = src.get(f"{src.name}#0")
    q = task.prompt[0]["content"]
    assert q.startswith("What is ") and q.endswith("? Put the final answer in \\boxed{}.")
    a, b = (int(x) for x in q[len("What is ") : q.index("?")].split(" + "))
    assert 10 <= a <= 99 and 10 <= b <= 99 and task.answer == str(a + b)
    assert task.meta == {
        "digits": 2,
        "ops": "+",
        "terms": 2,
        "steps": [{"expr": f"{a} + {b}", "value": a + b}],
        "rephrasings": (f"Compute {b} + {a}. Put the final answer in \\boxed{{}}.",),
    }


def test_arithmetic_knobs() -> None:
    src = arithmetic_source(digits=3, ops="*-+", terms=4)
    assert src.name == "arithmetic(digits=3,ops=+-*,terms=4)"
    for task in src.take("train", 50):
        expr = task.prompt[0]["content"][len("What is ") :].split("?")[0].split()
        operands, operators = [int(x) for x in expr[::2]], expr[1::2]
        assert len(operands) == 4 and all(100 <= x <= 999 for x in operands)
        assert set(operators) <= set("+-*") and task.answer == str(evaluate(operands, operators))
    assert evaluate([2, 3, 4, 5], ["+", "*", "-"]) == 2 + 3 * 4 - 5
    with pytest.raises(argym.ConfigError, match="ops"):
        arithmetic_source(ops="/")
    with pytest.raises(argym.ConfigError, match="digits"):
        arithmetic_source(digits=0)


def test_arithmetic_is_a_pure_function_of_the_index_across_processes() -> None:
    src = arithmetic_source(digits=2, ops="+-*", terms=3)
    ids = [f"{src.name}#{i}" for i in (0, 1, 17, 2**39 + 5)]
    here = [[t.prompt[0]["content"], t.answer, t.split] for t in map(src.get, ids)]
    assert here == [[t.prompt[0]["content"], t.answer, t.split] for t in map(src.get, ids)]
    code = (
        "import json, sys; from argym.envs.math.arithmetic import arithmetic_source as a; s = a(2, '+-*', 3); "
        "print(json.dumps([[t.prompt[0]['content'], t.answer, t.split] for t in map(s.get, json.loads(sys.argv[1]))]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(ids)], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == here


def test_arithmetic_splits_are_disjoint() -> None:
    src = arithmetic_source()
    test = {t.prompt[0]["content"] for t in src.test_tasks()}
    assert len(test) == src.test_size == 500
    rng = np.random.default_rng(0)
    train = {src.sample(rng, "train").prompt[0]["content"] for _ in range(20_000)}
    assert not test & train


def test_small_arithmetic_spaces_still_have_a_test_split() -> None:
    for ops in ("+", "-", "*", "+-*"):
        src = math_tasks(f"arithmetic(digits=1,ops={ops})")
        assert 1 <= len(src.test_tasks()) < 20


def test_task_id_lookup_whatever_the_split(executors: Executors) -> None:
    env = gym.make(MATH, executors=executors)
    src = env.unwrapped.tasks
    test_task = src.test_tasks()[3]
    train_task = src.sample(np.random.default_rng(1), "train")
    for task in (test_task, train_task):
        obs, info = env.reset(options={"task_id": task.id})
        assert (info["task_id"], info["split"], obs[0]["content"]) == (
            task.id,
            task.split,
            task.prompt[0]["content"],
        )
        assert src.get(task.id) == task
    with pytest.raises(argym.TaskNotFoundError):
        env.reset(options={"task_id": "nope#1"})


# ---- JSONL tasks -----------------------------------------------------------------------
def test_jsonl_tasks(tmp_path, executors: Executors) -> None:
    path = tmp_path / "algebra.jsonl"
    rows = [
        {"question": "What is 1/2 + 1/4?", "answer": "3/4"},
        {"question": "Solve $x+1=3$. Answer in \\boxed{}.", "answer": 2, "id": "eq", "split": "test"},
        {"question": "Half of 1?", "answer": 0.5, "split": "train"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]) + "\n")
    env = gym.make(MATH, tasks=str(path), split="all", executors=executors)
    src = env.unwrapped.tasks
    first, eq, half = src.get("algebra#1"), src.get("eq"), src.get("algebra#4")
    assert first.prompt[0]["content"] == "What is 1/2 + 1/4?\nPut the final answer in \\boxed{}."
    assert eq.prompt[0]["content"] == rows[1]["question"]  # it already asks for \boxed{}
    assert (eq.split, eq.answer, half.split, half.answer) == ("test", "2", "train", "0.5")
    assert first.split in ("train", "test")
    env.reset(options={"task_id": "algebra#1"})
    assert env.step("\\boxed{0.75}")[1] == 1.0
    assert gym.make(MATH, tasks=path).unwrapped.tasks.get("eq") == eq  # a Path works too


@pytest.mark.parametrize(
    "line, problem",
    [
        ("{not json", "cannot read task"),
        ('{"answer": "1"}', "question"),
        ('{"question": "q"}', "answer"),
        ('{"question": "q", "answer": [1]}', "answer"),
        ('["q", "1"]', "JSON object"),
        ('{"question": "q", "answer": "1", "split": "dev"}', "split"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, line: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "answer": "1"}\n' + line + "\n")
    with pytest.raises(argym.ConfigError, match=rf"bad\.jsonl:2: .*{problem}"):
        MathEnv(tasks=str(path))


def test_unknown_sources_are_config_errors(tmp_path) -> None:
    with pytest.raises(argym.ConfigError, match="arithmetic"):
        MathEnv(tasks="geometry(level=3)")
    with pytest.raises(argym.ConfigError, match="digits, ops, terms"):
        MathEnv(tasks="arithmetic(digit=2)")
    with pytest.raises(argym.ConfigError, match="does not exist"):
        MathEnv(tasks=str(tmp_path / "missing.jsonl"))
    with pytest.raises(argym.ConfigError, match="max_attempts"):
        MathEnv(max_attempts=0)


# ---- reasoning-gym ----------------------------------------------------------------
@pytest.mark.parametrize(
    "spec",
    [
        "reasoning_gym/basic_arithmetic",
        "reasoning_gym/chain_sum(max_terms=3,min_terms=2)",
        "reasoning_gym/gsm_symbolic",
        "reasoning_gym/fraction_simplification",
    ],
)
def test_reasoning_gym_oracle_verifies(spec: str, verifier: MathVerifier, executors: Executors) -> None:
    env = gym.make(MATH, tasks=spec, executors=executors)
    src = env.unwrapped.tasks
    assert src.name == spec
    for i in range(20):
        obs, _ = env.reset(seed=i)
        task = env.unwrapped.task
        assert obs[0]["content"].endswith("\nPut the final answer in \\boxed{}.")
        assert env.step(env.unwrapped.oracle_action())[1] == 1.0
        # and math-verify itself parses the gold: a different spelling of it verifies too
        assert verifier.check(task.answer, boxed("{" + task.answer + "}"))["correct"], task.answer
    assert src.get(task.id) == task  # a pure function of the index
    assert len(src.test_tasks()) == 500


def _rg_entry(name: str, seed: int):
    import reasoning_gym

    dataset = reasoning_gym.create_dataset(name, seed=seed, size=1)
    return dataset, dataset[0]


RG_CASES = [  # (dataset, how to spell the answer, the dataset's own score of it) on task #1
    ("word_sorting", lambda e: e["answer"], 1.0),
    ("word_sorting", lambda e: ", ".join(reversed(e["metadata"]["sorted_words"])), 0.2),  # math-verify: 1
    (
        "word_sorting",
        lambda e: ", ".join(e["metadata"]["sorted_words"][1:] + e["metadata"]["sorted_words"][:1]),
        0.2,
    ),
    ("spell_backward", lambda e: e["answer"], 1.0),
    ("spell_backward", lambda e: e["answer"].upper(), 1.0),  # math-verify: 0
    ("spell_backward", lambda e: e["answer"][:-1], 6 / 7),
    ("decimal_arithmetic", lambda e: e["answer"], 1.0),
    ("decimal_arithmetic", lambda e: "6.321", 1.0),  # within the dataset's tolerance; math-verify: 0
    ("decimal_arithmetic", lambda e: "+6.321", 1.0),  # math-verify: 0
    ("decimal_arithmetic", lambda e: "6.32e0", 1.0),  # math-verify: 0
    ("decimal_arithmetic", lambda e: "6.322", 0.0),
]


@pytest.mark.parametrize("name, spell, expected", RG_CASES)
def test_reasoning_gym_tasks_are_graded_by_their_datasets_scorer(
    name, spell, expected, executors: Executors
) -> None:
    """The dataset's ``score_answer`` is the specification; its score is the reward (issue 15, finding 12)."""
    dataset, entry = _rg_entry(name, 1)
    answer = spell(entry)
    spec_score = dataset.score_answer(answer, entry)
    assert spec_score == pytest.approx(expected)  # the case is what the test says it is
    env = gym.make(MATH, tasks=f"reasoning_gym/{name}", executors=executors)
    env.reset(options={"task_id": f"reasoning_gym/{name}#1"})
    _, reward, terminated, _, info = env.step(f"So: \\boxed{{{answer}}}")
    assert reward == pytest.approx(spec_score) and terminated
    assert info["success"] == (spec_score == 1.0) and info["verdict"]["score"] == pytest.approx(spec_score)


def test_reasoning_gym_partial_score_on_the_last_attempt_and_no_box_scores_0(executors: Executors) -> None:
    _, entry = _rg_entry("word_sorting", 1)
    wrong_order = ", ".join(reversed(entry["metadata"]["sorted_words"]))
    env = gym.make(MATH, tasks="reasoning_gym/word_sorting", max_attempts=2, executors=executors)
    env.reset(options={"task_id": "reasoning_gym/word_sorting#1"})
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{wrong_order}}}")
    assert (reward, terminated, obs[-1]["content"]) == (0.0, False, RETRY_MESSAGE)
    _, reward, terminated, _, info = env.step(f"\\boxed{{{wrong_order}}}")
    assert (reward, terminated, info["success"]) == (pytest.approx(0.2), True, False)
    env.reset(options={"task_id": "reasoning_gym/word_sorting#1"})
    env.step(entry["answer"])  # the right words, not boxed: argym's answer format, never scored
    _, reward, _, _, info = env.step(entry["answer"])
    assert reward == 0.0 and info["verdict"] == {
        "parsed": None,
        "correct": False,
        "reason": "no_boxed_answer",
        "score": 0.0,
    }


def test_reasoning_gyms_version_is_in_the_board_key() -> None:
    from importlib.metadata import version

    assert MathEnv(tasks="reasoning_gym/word_sorting").grader_versions() == {
        "reasoning-gym": version("reasoning-gym")
    }
    assert MathEnv(tasks="arithmetic").grader_versions()["argym-math-rules"] == RULES_VERSION


def test_a_reasoning_gym_scorer_that_fails_is_an_infrastructure_failure(executors: Executors) -> None:
    from argym.envs.tasks import ListSource
    from argym.types import Task

    scorer = {"kind": "reasoning_gym", "dataset": "no_such_dataset", "config": {}, "seed": 0}
    task = Task(id="broken", prompt=({"role": "user", "content": "?"},), answer="x", meta={"scorer": scorer})
    env = MathEnv(tasks=ListSource([task], name="broken"), executors=executors)
    env.reset(options={"task_id": "broken"})
    _, reward, terminated, _, info = env.step("\\boxed{x}")
    assert (reward, terminated, info["infra_failure"], info["verdict"]["reason"]) == (
        0.0,
        True,
        True,
        "infra_failure",
    )
    assert "no_such_dataset" in info["verdict"]["error"]


def test_a_fresh_pool_scores_reasoning_gym_within_a_short_deadline() -> None:
    """Importing reasoning-gym takes seconds: the workers' warm-up pays it, not the first answer's deadline."""
    _, entry = _rg_entry("spell_backward", 2)
    with verifier_pool(workers=1, deadline_s=1.5) as pool:
        scorer = {"kind": "reasoning_gym", "dataset": "spell_backward", "config": {}, "seed": 2}
        verdict = MathVerifier(pool).check(
            entry["answer"], f"\\boxed{{{entry['answer'].upper()}}}", scorer=scorer
        )
    assert verdict == {"parsed": entry["answer"].upper(), "correct": True, "reason": "verified", "score": 1.0}


def test_reasoning_gym_missing_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # makes `import reasoning_gym` fail
    with pytest.raises(argym.MissingDependencyError, match=r"pip install 'argym\[reasoning-gym\]'"):
        MathEnv(tasks="reasoning_gym/chain_sum")


def test_reasoning_gym_errors() -> None:
    with pytest.raises(argym.ConfigError, match="chain_sum"):
        MathEnv(tasks="reasoning_gym/chain_summ")
    with pytest.raises(argym.ConfigError, match="rejects the config"):
        MathEnv(tasks="reasoning_gym/chain_sum(bogus=1)")
    with pytest.raises(argym.ConfigError, match="seed and size"):
        MathEnv(tasks="reasoning_gym/chain_sum(seed=3)")
    a, b = (
        math_tasks(f"reasoning_gym/chain_sum({args})")
        for args in ("min_terms=2,max_terms=3", "max_terms=3, min_terms=2")
    )
    assert a.name == b.name == "reasoning_gym/chain_sum(max_terms=3,min_terms=2)"  # one name, one board key


# ---- answer_format="final": the reply's last expression, as math-verify extracts it ------
@pytest.mark.parametrize(
    "gold, text, parsed, correct, reason, is_boxed",
    [
        ("129", "75 + 54 = 129, so \\boxed{129}.", "129", True, "verified", True),  # boxed
        ("129", "75 + 54 = 129. The answer is 129.", "129", True, "verified", False),  # unboxed final number
        ("129", "The sum is 129.\n\nCheck: 129 - 54 = 75", "75", False, "mismatch", False),  # the last one
        ("0.5", "Half of it: $\\frac{1}{2}$", "\\frac{1}{2}", True, "verified", False),  # a fraction
        ("1/2", "So the result is 2/4", "2/4", True, "verified", False),  # a plain fraction
        ("7", "I do not know.", None, False, "no_answer", False),  # none
        ("7", "", None, False, "no_answer", False),
    ],
)
def test_final_answer_format(verifier, gold, text, parsed, correct, reason, is_boxed) -> None:
    assert verifier.check(gold, text, answer_format="final") == {
        "parsed": parsed,
        "correct": correct,
        "reason": reason,
        "boxed": is_boxed,
    }


def test_boxed_answer_format_ignores_unboxed_answers(verifier) -> None:
    assert verifier.check("129", "The answer is 129.") == {
        "parsed": None,
        "correct": False,
        "reason": "no_boxed_answer",
    }


def test_final_answer_format_through_the_env() -> None:
    env = gym.make(MATH, answer_format="final", max_attempts=2)
    env.reset(seed=1)
    gold = env.unwrapped.task.answer
    obs, reward, terminated, _, info = env.step(f"It is {int(gold) + 1}.")
    assert (reward, terminated, obs[-1]["content"]) == (0.0, False, RETRY_MESSAGE)
    assert info["verdict"] == {
        "parsed": str(int(gold) + 1),
        "correct": False,
        "reason": "mismatch",
        "boxed": False,
    }
    obs, reward, terminated, _, info = env.step(f"Sorry: the answer is {gold}.")
    assert (reward, terminated, info["success"], info["reward_parts"]) == (1.0, True, True, {"outcome": 1.0})
    env.reset(seed=1)
    assert env.step(env.unwrapped.oracle_action())[4]["verdict"]["boxed"] is True


def test_final_answer_format_on_adversarial_input_stays_bounded(fast_executors) -> None:
    env = MathEnv(answer_format="final", executors=fast_executors)
    for text in ("$" * 10_000, "1/" * 5000, "\\frac{" * 3000, "9^" * 3000 + "9"):
        env.reset(seed=0)
        t0 = time.perf_counter()
        _, reward, terminated, _, info = env.step(text)
        assert time.perf_counter() - t0 < DEADLINE_S + 3.0
        assert (reward, terminated, info["infra_failure"]) == (0.0, True, False), info["verdict"]


def test_answer_format_errors() -> None:
    with pytest.raises(argym.ConfigError, match="answer_format must be one of boxed, final, got 'latex'"):
        MathEnv(answer_format="latex")
    with pytest.raises(argym.ConfigError, match="reasoning-gym tasks are scored by their dataset"):
        MathEnv(tasks="reasoning_gym/chain_sum", answer_format="final")


# ---- the env ----------------------------------------------------------------------
def test_oracle_and_verdict(executors: Executors) -> None:
    env = gym.make(MATH, executors=executors)
    obs, info = env.reset(seed=0)
    assert env.unwrapped.oracle_action() == f"\\boxed{{{env.unwrapped.task.answer}}}"
    obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action())
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
    assert info["reward_parts"] == {"outcome": 1.0}
    assert info["verdict"] == {"parsed": env.unwrapped.task.answer, "correct": True, "reason": "verified"}
    assert obs[-1] == {"role": "assistant", "content": env.unwrapped.oracle_action()}


def test_multi_turn_feedback(executors: Executors) -> None:
    env = gym.make(MATH, max_attempts=3, executors=executors)
    env.reset(seed=1)
    gold = env.unwrapped.task.answer
    for attempt in (1, 2):
        obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{int(gold) + attempt}}}")
        assert (reward, terminated, truncated, info["turn"]) == (0.0, False, False, attempt)
        assert obs[-1] == {"role": "user", "content": RETRY_MESSAGE}
    obs, reward, terminated, truncated, info = env.step("I give up")
    assert (reward, terminated, truncated, info["success"]) == (0.0, True, False, False)
    assert info["verdict"]["reason"] == "no_boxed_answer" and len(obs) == 6
    with pytest.raises(argym.EnvStateError):
        env.step("\\boxed{1}")
    env.reset(seed=1)
    env.step("\\boxed{0.5}")
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{gold}}}")
    assert (reward, terminated, info["success"], len(obs)) == (1.0, True, True, 4)


def test_an_env_made_alone_owns_its_pool_and_close_releases_it(fast_executors: Executors) -> None:
    a, b = MathEnv(), MathEnv()
    for env in (a, b):
        env.reset(seed=0)
        assert env.step(env.oracle_action())[1] == 1.0
    assert a.verifier.pool is not b.verifier.pool
    (worker,) = a.verifier.pool._all
    a.close()
    assert worker.proc.poll() is not None  # a's worker is gone...
    b.reset(seed=1)
    assert b.step(b.oracle_action())[1] == 1.0  # ...and b, whose pool is its own, still grades
    b.close()
    given = MathEnv(executors=fast_executors)
    assert given.verifier.pool is fast_executors.verifier
    given.reset(seed=0)
    given.close()  # executors handed in stay their owner's: still running
    assert given.step(given.oracle_action())[1] == 1.0


def test_snapshot_restore_in_a_fresh_instance(executors: Executors) -> None:
    env = gym.make(MATH, max_attempts=3, executors=executors)
    env.reset(seed=5)
    env.step("\\boxed{1}")
    state = pickle.loads(pickle.dumps(env.get_wrapper_attr("snapshot")()))
    fresh = MathEnv(max_attempts=3, executors=executors)
    fresh.restore(state)
    assert fresh.snapshot().messages == state.messages and fresh.turn == 1
    gold = env.unwrapped.task.answer
    for action in ("\\boxed{2}", f"\\boxed{{{gold}}}"):
        assert fresh.step(action) == env.step(action)
    assert env.reset() == fresh.reset()  # the RNG state travelled too


def test_restore_into_a_fresh_gym_make_env(executors: Executors) -> None:
    """R³L and AgentPRM restore into envs built by gym.make (argym registers without the passive checker)."""
    env = gym.make(MATH, max_attempts=3, executors=executors)
    env.reset(seed=5)
    env.step("\\boxed{1}")
    fresh = gym.make(MATH, max_attempts=3, executors=executors)
    fresh.get_wrapper_attr("restore")(env.get_wrapper_attr("snapshot")())
    assert fresh.step("\\boxed{2}") == env.step("\\boxed{2}")


def test_a_verifier_worker_killed_under_the_env_is_an_infrastructure_failure() -> None:
    """The real verifier's worker dies (as under the OOM killer): that episode is an infrastructure
    failure, not a wrong answer; the next one gets a fresh worker and is graded."""
    import signal

    with verifier_pool(workers=1) as pool:
        env = MathEnv(executors=Executors(verifier=pool))
        env.reset(seed=0)
        assert env.step(env.oracle_action())[1] == 1.0
        (worker,) = pool._all
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(timeout=10)
        env.reset(seed=1)
        _, reward, terminated, _, info = env.step(env.oracle_action())
        assert (reward, terminated, info["infra_failure"], info["verdict"]["reason"]) == (
            0.0,
            True,
            True,
            "infra_failure",
        )
        env.reset(seed=2)
        _, reward, _, _, info = env.step(env.oracle_action())
        assert reward == 1.0 and not info["infra_failure"]
