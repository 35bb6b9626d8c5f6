"""PRMs: the rule-based scorer, a classifier checkpoint scoring step prefixes, AUC and BCE by hand."""

from __future__ import annotations

import math

import pytest

from argym.agents.renderer import ChatRenderer, conversation_ids
from argym.agents.tiny import build_tiny_tokenizer
from argym.rewards.prm import RuleBasedPRM, bce, build_classifier, load_prm, roc_auc
from argym.rewards.steps import render_text, split_steps, step_prefix
from argym.types import Trajectory


def single_turn(answer: str, correct: bool, verdict_extra=None) -> Trajectory:
    r = ChatRenderer(build_tiny_tokenizer())
    messages = [{"role": "user", "content": "What is 1 + 1?"}, {"role": "assistant", "content": answer}]
    ids, mask = conversation_ids(r, messages)
    return Trajectory(
        task_id="t",
        messages=messages,
        reward=float(correct),
        success=correct,
        turns=1,
        terminated=True,
        truncated=False,
        token_ids=ids,
        loss_mask=mask,
        turn_rewards=[float(correct)],
        turn_ends=[len(ids) - 1],
        infos=[{"verdict": {"correct": correct, **(verdict_extra or {})}, "success": correct}],
    )


def test_rule_prm_scores_the_last_step_of_a_turn_by_its_verdict():
    t = single_turn("think\n\n\\boxed{2}", True)
    r = ChatRenderer(build_tiny_tokenizer())
    assert RuleBasedPRM().score(t, split_steps(t, decode=r.decode)) == [None, 1.0]  # no verdict: no opinion
    assert RuleBasedPRM(neutral=0.0).score(t, split_steps(t, decode=r.decode)) == [0.0, 1.0]
    assert RuleBasedPRM().score(single_turn("\\boxed{3}", False)) == [-1.0]
    assert RuleBasedPRM(error=-0.5).score(single_turn("x", False, {"error": "unreadable"})) == [-0.5]
    assert RuleBasedPRM(error=-0.5).score(single_turn("x", False, {"tool_errors": ["bad args"]})) == [-0.5]


def test_classifier_prm_scores_prefixes_and_round_trips(tmp_path):
    prm = build_classifier(build_tiny_tokenizer(), hidden_size=32, num_layers=1, num_heads=2)
    t = single_turn("a\n\nb\n\n\\boxed{2}", True)
    steps = split_steps(t)
    scores = prm.score(t, steps)
    probs = prm.probabilities([render_text(step_prefix(t, steps, j)) for j in range(3)])
    assert scores == pytest.approx([2 * p - 1 for p in probs]) and len(set(scores)) == 3
    prm.save(tmp_path / "prm")
    loaded = load_prm(f"hf:{tmp_path / 'prm'}")
    assert loaded.score(t, steps) == pytest.approx(scores, abs=1e-5)
    # batching and padding do not change a prefix's score
    assert prm.probabilities([render_text(step_prefix(t, steps, 0))]) == pytest.approx(probs[:1], abs=1e-5)


def test_auc_and_bce_by_hand():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert roc_auc([0.5, 0.5], [True, False]) == 0.5  # a tie counts half
    assert math.isnan(roc_auc([0.2, 0.3], [True, True]))
    assert bce([0.5, 0.5], [1.0, 0.0]) == pytest.approx(math.log(2))
    assert bce([0.9], [0.9]) == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))
