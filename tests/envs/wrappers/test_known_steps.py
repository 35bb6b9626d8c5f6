"""The known intermediate quantities the wrapper checks against: arithmetic's sub-expressions, word problems' steps."""

from __future__ import annotations

import pytest

import argym
from argym.envs.math.arithmetic import arithmetic_source
from argym.envs.math.word_problems import TEMPLATES, word_problem_source
from argym.envs.wrappers import safe_eval


@pytest.mark.parametrize(
    "source", [arithmetic_source(digits=2, ops="+-*", terms=5), word_problem_source(max_number=15)]
)
def test_every_step_evaluates_to_its_value_and_the_last_is_the_answer(source):
    for task in source.take("train", 200):
        steps = task.meta["steps"]
        assert steps and all(safe_eval(s["expr"]) == s["value"] for s in steps)
        assert str(steps[-1]["value"]) == task.answer
        assert source.get(task.id).meta == task.meta  # a pure function of the index


def test_word_problems_are_named_split_and_served_by_math():
    src = word_problem_source()
    tasks = src.take("train", 300)
    assert {t.meta["template"] for t in tasks} == {t.name for t in TEMPLATES}
    assert all(all(s["name"] for s in t.meta["steps"]) and int(t.answer) >= 0 for t in tasks)
    test_prompts = {t.prompt[0]["content"] for t in src.take("test", None)}
    assert test_prompts and not test_prompts & {t.prompt[0]["content"] for t in tasks}
    env = argym.make("argym/Math-v0", tasks="word_problems(max_number=9)")
    obs, _ = env.reset(seed=0)
    assert obs[0]["content"].endswith("Put the final answer in \\boxed{}.")
    assert env.step(env.unwrapped.oracle_action())[1] == 1.0
    with pytest.raises(argym.ConfigError, match="max_number"):
        argym.make("argym/Math-v0", tasks="word_problems(max_number=1)")
    with pytest.raises(argym.ConfigError, match="word_problems takes"):
        argym.make("argym/Math-v0", tasks="word_problems(digits=2)")
