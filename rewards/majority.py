"""Majority vote over a group's answers: the pseudo-label of label-free RL (TTRL, arXiv 2504.16084 §3).

A group's answers are split into equivalence classes by `same(a, b)` (in training, the Math env's
math-verify comparison); the largest class's answer is the pseudo-label ŷ, and a sample's reward is
r_i = 1[a_i ≡ ŷ] (TTRL eq. 2 with the estimated label in place of the gold one). The vote's share,
|largest class| / |valid samples|, is TTRL's "majority ratio".

Where TTRL is silent, argym decides (docs/label_free.md):
- a tie between the largest classes gives **no** pseudo-label: every sample of the group scores 0, so
  under a group-relative advantage the group carries no gradient. A coin flip would train half the
  time on the wrong one of two equally supported answers, and the tie is most common exactly where
  the policy is least sure;
- a sample with no parseable answer (``None``) takes no part in the vote and scores 0; a group where
  no sample has one has no label;
- classes are built greedily: an answer joins the first class whose first answer it equals (text
  equal after removing spaces, else `same`), so math-verify is asked once per (answer, class) pair.

Pure Python, no torch: the components that use it (argym.algorithms.pseudo_labels) pass the equivalence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Same = Callable[[str, str], bool]
"""Whether two answers are the same value (math-verify equivalence in training)."""


def _key(answer: str) -> str:
    return "".join(answer.split())


@dataclass(frozen=True)
class Classes:
    """A group's answers split into equivalence classes."""

    of: tuple[int | None, ...]
    """Class index of each answer; None for a sample with no parseable answer."""
    reps: tuple[str, ...]
    """Each class's first answer (its representative)."""

    @property
    def sizes(self) -> list[int]:
        counts = [0] * len(self.reps)
        for c in self.of:
            if c is not None:
                counts[c] += 1
        return counts

    def member(self, label: str, same: Same) -> int | None:
        """The class whose representative equals `label` (text, then `same`), or None."""
        for c, rep in enumerate(self.reps):
            if _key(rep) == _key(label):
                return c
        for c, rep in enumerate(self.reps):
            if same(label, rep):
                return c
        return None


def answer_classes(answers: Sequence[str | None], same: Same) -> Classes:
    """Split `answers` into equivalence classes (greedy, see the module docstring)."""
    reps: list[str] = []
    keys: list[str] = []
    of: list[int | None] = []
    for a in answers:
        if a is None:
            of.append(None)
            continue
        k = _key(a)
        found = next((c for c, rk in enumerate(keys) if rk == k), None)
        if found is None:
            found = next((c for c, rep in enumerate(reps) if same(rep, a)), None)
        if found is None:
            reps.append(a)
            keys.append(k)
            found = len(reps) - 1
        of.append(found)
    return Classes(tuple(of), tuple(reps))


@dataclass(frozen=True)
class Vote:
    """A group's majority vote."""

    classes: Classes
    winner: int | None
    """The winning class; None on a tie or when nothing parsed."""
    outcome: str
    """majority | tie | no_answer"""
    share: float
    """|largest class| / samples voting (parsed or not); 0 when nothing parsed."""

    @property
    def label(self) -> str | None:
        """The pseudo-label: the winning class's representative (None without a winner)."""
        return None if self.winner is None else self.classes.reps[self.winner]

    def rewards(self) -> list[float]:
        """r_i = 1[a_i in the winning class] (TTRL eq. 2); all 0 without a label."""
        return [1.0 if c is not None and c == self.winner else 0.0 for c in self.classes.of]


def majority_vote(answers: Sequence[str | None], same: Same) -> Vote:
    """The majority vote of one group's answers (None: no parseable answer)."""
    classes = answer_classes(answers, same)
    sizes = classes.sizes
    if not sizes:
        return Vote(classes, None, "no_answer", 0.0)
    top = max(sizes)
    share = top / len(answers)
    if sizes.count(top) > 1:
        return Vote(classes, None, "tie", share)
    return Vote(classes, sizes.index(top), "majority", share)


def agreement_rewards(classes: Classes, label: str | None, same: Same) -> list[float]:
    """r_i = 1[a_i ≡ label] for a label from elsewhere (a rephrasing's vote, a teacher): one comparison per
    class; all 0 without a label."""
    if label is None:
        return [0.0] * len(classes.of)
    win = classes.member(label, same)
    return [1.0 if c is not None and c == win else 0.0 for c in classes.of]


def answer_entropy(classes: Classes) -> float:
    """Entropy (nats) of the group's answer distribution over its classes; unparsed samples are left out."""
    sizes = [s for s in classes.sizes if s]
    n = sum(sizes)
    return -sum(s / n * math.log(s / n) for s in sizes) if n else 0.0


def answer_diversity(classes: Classes) -> float:
    """Distinct answers per parsed answer, in (0, 1] (1: every sample answered differently); 0 if none parsed."""
    n = sum(1 for c in classes.of if c is not None)
    return len(classes.reps) / n if n else 0.0
