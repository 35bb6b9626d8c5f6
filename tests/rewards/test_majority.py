"""Majority vote on hand-built groups (TTRL's pseudo-label), with math-verify as the equivalence."""

from __future__ import annotations

import math

from argym.envs.math.verifier import verify_answer
from argym.rewards.majority import (
    agreement_rewards,
    answer_classes,
    answer_diversity,
    answer_entropy,
    majority_vote,
)


def same(a: str, b: str) -> bool:
    return verify_answer(a, b)


def test_a_majority_counts_equivalent_answers_as_one_class():
    vote = majority_vote(["12", "12.0", "7", None, "x = 12"], same)
    assert vote.outcome == "majority" and vote.label == "12"
    assert vote.share == 3 / 5  # of every sample that voted, the unparsed one included
    assert vote.rewards() == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_an_unevaluated_expression_is_not_the_integer_it_equals():
    # as the Math grader has it (verifier._stated): 24/2 states a division, not 12
    vote = majority_vote(["12", "12.0", "7", None, "\\frac{24}{2}"], same)
    assert vote.label == "12" and vote.share == 2 / 5
    assert vote.rewards() == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_a_tie_gives_no_label_and_no_reward():
    vote = majority_vote(["3", "4", "4.0", "3", None], same)
    assert vote.outcome == "tie" and vote.label is None
    assert vote.share == 2 / 5
    assert vote.rewards() == [0.0] * 5


def test_no_parseable_answer_gives_no_label():
    vote = majority_vote([None, None, None], same)
    assert (vote.outcome, vote.label, vote.share) == ("no_answer", None, 0.0)
    assert vote.rewards() == [0.0, 0.0, 0.0]
    assert answer_entropy(vote.classes) == 0.0 and answer_diversity(vote.classes) == 0.0


def test_a_label_from_elsewhere_rewards_its_equivalents():
    classes = answer_classes(["0.5", "\\frac{1}{2}", "2", None], same)
    assert agreement_rewards(classes, "1/2", same) == [1.0, 1.0, 0.0, 0.0]
    assert agreement_rewards(classes, "9", same) == [0.0] * 4
    assert agreement_rewards(classes, None, same) == [0.0] * 4


def test_entropy_and_diversity_of_a_group():
    classes = answer_classes(["1", "1", "2", "3"], same)
    assert math.isclose(answer_entropy(classes), -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))
    assert answer_diversity(classes) == 3 / 4
