"""`argym/Code-v0`'s ``composed`` source: two-step procedural specs, 200 distinct held-out tasks, each
solved by its reference in the real sandbox and failed by a one-step answer."""

from __future__ import annotations

import argym
from argym.agents.evaluate import eval_tasks

SOURCE = {"tasks": "composed(test_size=200)"}


def test_two_hundred_distinct_test_tasks_apart_from_train():
    test = eval_tasks("argym/Code-v0", SOURCE, "test", 200)
    prompts = {t.prompt[0]["content"] for t in test}
    assert len(test) == len(prompts) == 200
    train = eval_tasks("argym/Code-v0", SOURCE, "train", 300)
    assert not prompts & {t.prompt[0]["content"] for t in train}


def test_the_reference_passes_the_hidden_tests_and_a_half_answer_fails():
    env = argym.make("argym/Code-v0", **SOURCE, max_attempts=1)
    try:
        for task in eval_tasks("argym/Code-v0", SOURCE, "test", 12):
            env.reset(options={"task_id": task.id})
            _, reward, *_, info = env.step(env.unwrapped.oracle_action())
            assert info["success"] and reward == 1.0, task.id
    finally:
        env.close()
    # one step of "the sum of the elements greater than j" without its filter: a test catches it
    task = next(
        t
        for t in eval_tasks("argym/Code-v0", SOURCE, "test", 200)
        if "Return the sum of the elements of xs that are greater than" in t.prompt[0]["content"]
    )
    env = argym.make("argym/Code-v0", tasks=[task], max_attempts=1)
    try:
        env.reset(options={"task_id": task.id})
        _, reward, *_, info = env.step("```python\n    return sum(xs)\n```")
        assert not info["success"] and reward == 0.0
        assert info["verdict"]["passed"] + info["verdict"]["failed"] == 5 and info["verdict"]["failed"] >= 1
    finally:
        env.close()
