"""DecomposeReasoner (verified mode): checkable sub-questions, step scores, min-form, snapshots, check_env."""

from __future__ import annotations

import pickle
import warnings
from fractions import Fraction

import pytest
from gymnasium.utils.env_checker import check_env

import argym
from argym.agents.scripted import OracleAgent
from argym.envs.wrappers import DecomposeReasoner, NotCheckable, check_subquestion, safe_eval
from argym.envs.wrappers.decompose import FINAL_PROMPT

TASKS = "arithmetic(digits=2,ops=+*,terms=3)"


def make(**kw):
    return argym.make("argym/DecomposeReasoner-v0", tasks=TASKS, **kw)


def play(env, actions, seed=0):
    obs, _ = env.reset(seed=seed)
    out = []
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, term, trunc, info))
        if term or trunc:
            break
    return out


def oracle_actions(env, seed=0):
    """The oracle's actions on the episode of `seed` (sub-answers as the oracle gives them)."""
    env.reset(seed=seed)
    steps = env.get_wrapper_attr("known_steps")
    return [
        "\n".join(s["expr"] for s in steps),
        *[str(s["value"]) for s in steps],
        f"\\boxed{{{env.unwrapped.task.answer}}}",
    ]


def test_wrapper_passes_check_env():
    env = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # wrapped-env and render_fps notes
        check_env(env)
    env.close()


def test_oracle_episode_gets_outcome_plus_full_process_reward():
    env = make(lam=0.5)
    obs, _ = env.reset(seed=3)
    assert obs[-1]["content"].startswith("Break it into sub-questions")
    agent, rewards, infos = OracleAgent(), [], []
    while True:
        obs, r, term, trunc, info = env.step(agent.act(obs, env))
        rewards.append(r)
        infos.append(info)
        if term or trunc:
            break
    steps = env.get_wrapper_attr("known_steps")
    assert len(rewards) == 1 + len(steps) + 1 and rewards[:-1] == [0.0] * (len(rewards) - 1)
    assert [i["step_score"] for i in infos[1:-1]] == [1.0] * len(steps)
    assert infos[-1]["reward_parts"] == {"outcome": 1.0, "process": pytest.approx(0.5)}
    assert (
        rewards[-1] == pytest.approx(1.5)
        and infos[-1]["success"]
        and infos[-1]["step_rewards"] == [1.0] * len(steps)
    )
    assert obs[-2]["content"] == FINAL_PROMPT


def test_step_rewards_and_min_form_on_scripted_episodes():
    """A wrong sub-answer removes the process reward; padding with easy correct steps earns nothing."""
    env = make(lam=0.5, relevant_only=False)
    good = oracle_actions(env)
    steps = env.get_wrapper_attr("known_steps")
    full = play(env, good)[-1]
    # one wrong sub-answer, right final answer: the outcome stays, the process part is ~0 (min-form)
    wrong = good[:1] + [str(steps[0]["value"] + 1)] + good[2:]
    last = play(env, wrong)
    assert last[1][4]["step_score"] == 0.0 and last[-1][4]["step_rewards"][0] == 0.0
    assert last[-1][4]["reward_parts"]["outcome"] == 1.0 and last[-1][4]["reward_parts"]["process"] < 1e-3
    # padding: three extra trivial sub-questions, all answered right, change nothing
    padded = [good[0] + "\n1 + 1\n2 + 2\n3 + 3", *good[1 : 1 + len(steps)], "2", "4", "6", good[-1]]
    pad_last = play(env, padded)[-1]
    assert pad_last[4]["step_rewards"] == [1.0] * (len(steps) + 3)
    assert pad_last[1] == pytest.approx(full[1]) == pytest.approx(1.5)
    # ... and padding a decomposition that has a wrong step does not buy the process reward back
    padded_wrong = [padded[0], str(steps[0]["value"] + 1), *padded[2:]]
    pw = play(env, padded_wrong)[-1]
    assert pw[4]["reward_parts"]["process"] < 1e-3
    sum_form = 0.5 * sum(pw[4]["step_rewards"]) / len(pw[4]["step_rewards"])
    assert sum_form > 0.3  # what an average of step scores would have paid


def test_uncheckable_subquestions_are_rejected_with_a_reason():
    env = make()
    env.reset(seed=0)
    first = env.get_wrapper_attr("known_steps")[0]["expr"]
    obs, r, term, trunc, info = env.step(f"{first}\nwhat is the product?\n2 ** 40\n1 / 0\n1 + 1\n42\n{first}")
    rejected = {x["text"]: x["reason"] for x in info["verdict"]["rejected"]}
    assert "not an arithmetic expression" in rejected["what is the product?"]
    assert "only numbers" in rejected["2 ** 40"] and "divides by zero" in rejected["1 / 0"]
    assert "intermediate quantities" in rejected["1 + 1"] and "bare number" in rejected["42"]
    assert "repeats" in rejected[first]
    assert [a["text"] for a in info["verdict"]["accepted"]] == [first]
    assert "Rejected '1 / 0': it divides by zero." in obs[-1]["content"] and obs[-1]["content"].endswith(
        f"{first} ="
    )
    assert env.get_wrapper_attr("step_scores") == [0.0] * 6 and (r, term, trunc) == (0.0, False, False)


def test_named_quantities_of_word_problems_are_checkable():
    env = argym.make("argym/DecomposeReasoner-v0", tasks="word_problems")
    env.reset(seed=1)
    steps = env.get_wrapper_attr("known_steps")
    obs, *_, info = env.step(steps[0]["name"])
    assert (
        info["verdict"]["accepted"][0]["kind"] == "quantity" and obs[-1]["content"] == f"{steps[0]['name']} ="
    )
    _, _, _, _, info = env.step(f"It is {steps[0]['value']}.")
    assert info["step_score"] == 1.0


def test_malformed_actions_are_observations_not_crashes():
    env = make()
    env.reset(seed=0)
    obs, r, term, trunc, info = env.step(7)
    assert "could not be read" in obs[-1]["content"] and obs[-1]["content"].endswith(FINAL_PROMPT)
    assert (r, term) == (0.0, False)
    obs, r, term, trunc, info = env.step("no box here")
    assert term and info["reward_parts"] == {"outcome": 0.0, "process": 0.0} and not info["success"]
    with pytest.raises(argym.EnvStateError, match="after the episode ended"):
        env.step("again")
    with pytest.raises(argym.EnvStateError, match="before reset"):
        make().step("x")


def test_snapshot_restores_the_exact_state_in_a_fresh_instance():
    env = make()
    actions = oracle_actions(env, seed=5)
    env.reset(seed=5)
    env.step(actions[0])
    env.step(actions[1])
    state = pickle.loads(pickle.dumps(env.get_wrapper_attr("snapshot")()))
    expected = env.step("12345")
    fresh = make()
    fresh.get_wrapper_attr("restore")(state)
    again = fresh.step("12345")
    assert again[0] == expected[0] and again[1:4] == expected[1:4] and again[4] == expected[4]


def test_safe_eval_is_exact_and_bounded():
    assert safe_eval("38 * 12 + 7") == 463 and safe_eval("(1 + 2) / 4") == Fraction(3, 4)
    assert safe_eval("0.1 + 0.2") == Fraction(3, 10) and safe_eval("-3 × 2") == -6
    for bad, reason in [
        ("__import__('os')", "only numbers"),
        ("9" * 20 + " * " + "9" * 20, "too large"),
        ("1 +", "not an arithmetic"),
        ("x" * 300, "longer than"),
    ]:
        with pytest.raises(NotCheckable, match=reason):
            safe_eval(bad)
    with pytest.raises(NotCheckable, match="quantities"):
        check_subquestion("apples", [{"name": "apples bought", "value": 4}])
    assert check_subquestion("Apples bought?", [{"name": "apples bought", "value": 4}]).value == 4


def test_undecodable_text_is_not_checkable_and_the_episode_goes_on():
    """A lone surrogate or a NUL byte cannot be compiled: a sub-question the wrapper cannot check, not a crash
    (found by `argym check`'s bad-input corpus)."""
    for bad in ("1 + \udcff", "1\x00 + 2"):
        with pytest.raises(NotCheckable, match="not an arithmetic"):
            safe_eval(bad)
    env = argym.make("argym/DecomposeReasoner-v0")
    env.reset(seed=0)
    obs, reward, *_ = env.step("answer \udcff\ud800")
    assert reward == 0 and obs[-1]["role"] == "user"
    env.close()


def test_wrapper_kwargs_are_checked():
    with pytest.raises(argym.ConfigError, match="lam"):
        make(lam=-1)
    with pytest.raises(argym.ConfigError, match="wrap itself"):
        argym.make("argym/DecomposeReasoner-v0", env="argym/DecomposeReasoner-v0")
    assert isinstance(make(), DecomposeReasoner)


def test_oracle_decomposition_asks_a_repeated_step_once():
    from argym.envs.math.arithmetic import evaluation_steps
    from argym.types import Task

    steps = evaluation_steps([8, 4, 8, 4], ["*", "+", "*"])
    assert [s["expr"] for s in steps] == ["8 * 4", "8 * 4", "8 * 4 + 8 * 4"]
    task = Task(
        id="twice",
        prompt=({"role": "user", "content": "What is 8 * 4 + 8 * 4? Put the final answer in \\boxed{}."},),
        answer="64",
        meta={"steps": steps},
    )
    env = make()
    obs, _ = env.reset(options={"task": task})
    agent = OracleAgent()
    while True:
        obs, r, term, trunc, info = env.step(agent.act(obs, env))
        if term or trunc:
            break
    assert r == pytest.approx(1.5) and info["step_rewards"] == [1.0, 1.0]
