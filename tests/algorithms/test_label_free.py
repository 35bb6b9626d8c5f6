"""Rewards without labels: the pseudo-label components on hand-built groups, Co-rewarding's two views, the EMA
teacher's update rule, the collapse flag, the co-trained reward model's schedule and label budget, and a
3-step run of each recipe."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.co_trained_rm import CoTrainedRewardModel
from argym.algorithms.collapse import CollapseMonitor
from argym.algorithms.config import load_config
from argym.algorithms.ema_teacher import EMATeacher
from argym.algorithms.pseudo_labels import (
    MathEquivalence,
    PseudoLabelReward,
    own_majority,
    rephrasing_majority,
)
from argym.algorithms.trainer import Trainer
from argym.envs.math.arithmetic import arithmetic_source
from argym.envs.math.env import math_tasks
from argym.envs.math.verifier import verify_answer
from argym.envs.math.word_problems import word_problem_source
from argym.envs.rephrase import REPHRASED, partner_id, rephrased
from argym.errors import ConfigError
from argym.rewards.compose import RewardComposer, RewardConfig
from argym.rewards.label_free_config import RewardModelConfig
from argym.types import Task, Trajectory

from ..tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]


def same(a: str, b: str) -> bool:
    return verify_answer(a, b)


def sample(
    task_id: str, group: int, parsed: str | None, success: bool = False, infra: bool = False
) -> Trajectory:
    verdict = {"parsed": parsed, "correct": success, "reason": "verified" if success else "mismatch"}
    return Trajectory(
        task_id=task_id,
        messages=[
            {"role": "user", "content": task_id},
            {"role": "assistant", "content": f"\\boxed{{{parsed}}}"},
        ],
        reward=float(success),
        success=success,
        turns=1,
        terminated=True,
        truncated=False,
        infos=[{"verdict": verdict, "success": success}],
        group=group,
        infra_failure=infra,
    )


GOLD = {"a": "12", "b": "5", "c": "7"}


def test_majority_on_a_majority_a_tie_and_no_parseable_answer():
    batch = [
        *(sample("a", 0, x, success=x in ("12", "12.0")) for x in ("12", "12.0", "13", None)),  # majority 12
        *(sample("b", 1, x, success=x == "5") for x in ("5", "6", "6", "5")),  # a tie
        *(sample("c", 2, None) for _ in range(4)),  # nothing parsed
    ]
    component = PseudoLabelReward("majority", own_majority, same, gold=GOLD.get)
    assert component(batch) == [1.0, 1.0, 0.0, 0.0] + [0.0] * 8
    m = component.report()
    assert m["majority/label_accuracy"] == 1.0  # the one label (group a's) is the gold answer
    assert m["majority/tie_frac"] == m["majority/no_answer_frac"] == 1 / 3
    assert m["majority/no_label_frac"] == 2 / 3
    assert m["majority/vote_share"] == pytest.approx((2 / 4 + 2 / 4 + 0) / 3)
    assert m["majority/reward_accuracy"] == 10 / 12  # group b's two right answers got 0


def test_co_rewarding_i_labels_each_view_with_the_others_vote_and_an_all_failed_partner_gives_none():
    batch = [
        *(sample("a", 0, x) for x in ("12", "13", "13", "12")),  # a tie on its own
        *(sample("a" + REPHRASED, 1, x) for x in ("12", "12", "13", None)),  # majority 12 → labels group 0
        *(sample("b", 2, x) for x in ("5", "5", "6", "5")),
        *(sample("b" + REPHRASED, 3, "5", infra=True) for _ in range(4)),  # the rephrasing's group all failed
    ]
    config = RewardConfig(weights={"outcome": 0.0, "co_reward_data": 1.0})
    component = PseudoLabelReward("co_reward_data", rephrasing_majority, MathEquivalence(), gold=GOLD.get)
    out, metrics = RewardComposer(config, sequence={"co_reward_data": component})(batch)
    assert [t.reward for t in out[:4]] == [1.0, 0.0, 0.0, 1.0]  # group 0 scored against group 1's label
    assert [t.reward for t in out[4:8]] == [0.0, 0.0, 0.0, 0.0]  # group 0 tied: group 1 has no label
    assert [t.reward for t in out[8:12]] == [0.0] * 4  # no partner group: no label, not its own majority
    assert all(t.infra_failure for t in out[12:])
    assert metrics["co_reward_data/no_label_frac"] == 2 / 3
    assert metrics["co_reward_data/label_accuracy"] == 1.0
    assert metrics["co_reward_data/verifier_faults"] == 0.0
    component.same.pool.close()


def test_rephrasings_keep_the_answer_and_a_task_without_one_is_refused(tmp_path):
    for task in arithmetic_source(digits=2, ops="+*", terms=3).take("train", 20):
        other = rephrased(task)
        expr = other.prompt[0]["content"].removeprefix("Compute ").split(".")[0]
        assert other.id == task.id + REPHRASED and partner_id(other.id) == task.id
        assert eval(expr) == int(task.answer) and other.prompt != task.prompt
    for task in word_problem_source().take("train", 20):
        other = rephrased(task)
        assert other.answer == task.answer and other.prompt[0]["content"] != task.prompt[0]["content"]
    with pytest.raises(ConfigError, match="declares no rephrasing"):
        rephrased(Task(id="q", prompt=({"role": "user", "content": "2+2?"},), answer="4"))
    path = tmp_path / "qs.jsonl"
    path.write_text(json.dumps({"question": "1+1?", "answer": 2, "rephrasings": ["One plus one?"]}) + "\n")
    task = math_tasks(str(path)).take("all", 1)[0]
    assert rephrased(task).prompt[0]["content"].startswith("One plus one?\nPut the final answer in")


def test_ema_teacher_update_rule():
    torch.manual_seed(0)
    student = torch.nn.Linear(3, 2)
    teacher = EMATeacher(student, decay=0.9)
    before = teacher.model.weight.clone()
    assert torch.equal(before, student.weight) and not teacher.model.weight.requires_grad
    with torch.no_grad():
        student.weight.add_(1.0)
    teacher.update(student)
    assert torch.allclose(
        teacher.model.weight, 0.9 * before + 0.1 * student.weight
    )  # θ_T ← d θ_T + (1 − d) θ
    assert not torch.equal(teacher.model.weight, student.weight)
    with pytest.raises(ValueError, match="decay"):
        EMATeacher(student, decay=1.0)


def test_collapse_is_flagged_when_agreement_rises_as_accuracy_falls(caplog):
    monitor = CollapseMonitor("majority", window=2, drop=0.1)
    flags = []
    with caplog.at_level(logging.WARNING, logger="argym.algorithms.collapse"):
        for share, acc in [(0.5, 0.6), (0.5, 0.6), (0.6, 0.6), (0.7, 0.5), (0.8, 0.3), (0.9, 0.2)]:
            flags.append(monitor.update(share, acc).get("majority/collapse"))
    assert flags == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert len(caplog.records) == 1 and "label-free collapse (majority)" in caplog.text
    assert monitor.update(0.9, None) == {}  # no gold answers: nothing measured


def test_a_gradual_collapse_is_flagged_against_the_best_window():
    """Label accuracy falling 0.015 a step (0.075 per 5-step window, under the 0.1 drop between any two adjacent
    windows) while the vote share rises: the slow slide measured on Math from a weak warm start."""
    monitor = CollapseMonitor("majority", window=5, drop=0.1)
    flags = [monitor.update(0.40 + 0.01 * t, 0.50 - 0.015 * t)["majority/collapse"] for t in range(20)]
    assert flags == [0.0] * 11 + [1.0] * 9  # from the window 0.105 below the first (best) one
    steady = CollapseMonitor(
        "majority", window=5, drop=0.1
    )  # accuracy holding while the share rises: no flag
    assert not any(
        steady.update(0.40 + 0.01 * t, 0.50 + 0.002 * (t % 3))["majority/collapse"] for t in range(20)
    )


def test_the_co_trained_reward_model_refits_on_schedule_within_its_label_budget():
    tokenizer = build_tiny_tokenizer()
    config = RewardModelConfig(
        refit_every=3, label_fraction=0.5, label_budget=10, epochs=1, hidden_size=16, num_layers=1
    )
    rm = CoTrainedRewardModel(tokenizer, config, max_positions=64)
    batch = [sample(f"t{i}", i // 2, str(i % 3), success=i % 3 == 0) for i in range(8)]
    refits = []
    for _ in range(7):
        scores = rm(batch)
        refits.append(rm.refits)
        assert len(scores) == 8 and all(0.0 <= s <= 1.0 for s in scores)
        assert rm.labels_used == len(rm.targets) <= config.label_budget
    assert refits == [1, 1, 1, 2, 2, 2, 3]  # calls 0, 3 and 6
    assert rm.labels_used == 10  # 4 + 4, then the 2 left of the budget
    report = rm.report()
    assert report["reward_model/labels_used"] == 10 and report["reward_model/budget_left"] == 0
    assert {"reward_model/accuracy", "reward_model/frozen_accuracy"} <= set(report)
    frozen = CoTrainedRewardModel(
        tokenizer, RewardModelConfig(refit_every=0, label_budget=10, hidden_size=16, num_layers=1), 64
    )
    for _ in range(4):
        frozen(batch)
    assert frozen.refits == 1 and frozen.labels_used == 1  # ceil(0.1 · 8): fit once, then frozen


SMOKE = [
    *TINY_RUN,
    "rollout.tasks_per_step=2",
    "rollout.group_size=3",
    "rollout.max_new_tokens=6",
    "eval.episodes=2",
    "eval.every=0",
    "steps=3",
]


@pytest.mark.parametrize(
    "recipe, overrides, logged",
    [
        (  # majority trained on; both Co-rewarding views computed and logged beside it (weight 0)
            "label_free_math.yaml",
            [
                "rollout.strategy=paired",
                "reward.weights.co_reward_data=0",
                "reward.weights.co_reward_teacher=0",
            ],
            [
                "majority/vote_share",
                "co_reward_data/no_label_frac",
                "co_reward_teacher/answer_entropy",
                "train/entropy",
            ],
        ),
        (
            "corlhf_math.yaml",
            [
                "reward.reward_model.refit_every=2",
                "reward.reward_model.label_budget=4",
                "reward.reward_model.hidden_size=16",
                "reward.reward_model.num_layers=1",
            ],
            ["reward_model/labels_used", "reward_model/frozen_accuracy"],
        ),
    ],
)
def test_three_steps_of_each_recipe(tmp_path, recipe, overrides, logged):
    cfg = load_config(REPO / "configs" / recipe, [*SMOKE, *overrides, f"out_dir={tmp_path}"])
    trainer = Trainer(cfg)
    try:
        trainer.fit()
    finally:
        trainer.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    for key in logged:
        assert key in rows[-1], key
    if recipe == "corlhf_math.yaml":
        assert [r["reward_model/labels_used"] for r in rows] == [1.0, 1.0, 2.0]  # refits at steps 1 and 3


def test_label_free_settings_that_would_leak_labels_are_refused(tmp_path):
    base = [*SMOKE, f"out_dir={tmp_path}"]
    for overrides, match in [
        (["reward.weights.co_reward_data=1"], "rollout.strategy=paired"),
        (["sampling.dynamic=true"], "sampling.dynamic"),
        (["env.kwargs.max_attempts=2"], "max_attempts"),
    ]:
        with pytest.raises(ConfigError, match=match):
            load_config(REPO / "configs" / "label_free_math.yaml", base + overrides)
