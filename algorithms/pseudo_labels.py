"""Rewards without labels: a pseudo-label per group, and r_i = 1[a_i ≡ pseudo-label] (docs/label_free.md).

Three reward components (``reward.weights``), differing only in where a group's label comes from:
- ``majority`` (TTRL, arXiv 2504.16084 §3): the group's own majority answer (argym.rewards.majority);
- ``co_reward_data`` (Co-rewarding-I, arXiv 2508.00410 §3.2): the majority answer of the group of the
  question's rephrasing, and the other way round; needs ``rollout.strategy: paired``
  (argym.algorithms.paired_rollout), which samples both in one step;
- ``co_reward_teacher`` (Co-rewarding-II, §3.3): the greedy answer of an EMA teacher of the policy
  (argym.algorithms.ema_teacher), updated once per scored batch with ``reward.label_free.ema_decay``.

A sample's answer is what the env parsed (Math's ``verdict["parsed"]``); answers are compared with
math-verify through the Math verifier's worker pool (`MathEquivalence`). Gold answers are never
trained on: where the env's tasks have them they only measure, every step, under
``<component>/``: ``label_accuracy`` (labels equal to the gold answer, of the groups with a label),
``reward_accuracy`` (pseudo-rewards equal to the verified outcome), ``vote_share``, ``tie_frac``,
``no_answer_frac``, ``no_label_frac``, ``diversity`` (distinct answers per answer), ``answer_entropy``,
``label_agreement`` (share of labelled groups whose label is the batch's most common one, by text) and
``collapse`` (argym.algorithms.collapse). The learner logs the policy's token entropy
(``train/entropy``) beside them.

Label-free means no label reaches the update: DAPO's dynamic sampling (it keeps groups by their
verified outcome) and Math's retries (``max_attempts > 1``: the env says "incorrect") are refused when
the recipe is read (`argym.rewards.label_free_config.check_label_free`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.algorithms.collapse import CollapseMonitor
from argym.algorithms.ema_teacher import EMATeacher
from argym.envs.executors import DeadlineExceeded, WorkerPool
from argym.envs.math.verifier import extract_answer, verifier_pool
from argym.envs.rephrase import base_id, partner_id
from argym.errors import ConfigError, InfrastructureError, TaskNotFoundError
from argym.rewards.compose import RewardContext, register_reward
from argym.rewards.custom import env_tasks
from argym.rewards.majority import (
    Same,
    Vote,
    agreement_rewards,
    answer_diversity,
    answer_entropy,
    majority_vote,
)
from argym.types import Trajectory

Gold = Callable[[str], "str | None"]
"""A task id's gold answer, for measuring only (None where the task has none)."""
Labeller = Callable[[list[Trajectory], dict[int, list[int]], dict[int, Vote]], dict[int, "str | None"]]
"""`(trajectories, group → member indices, group → its own vote) -> group → pseudo-label` (None: no label)."""


def answer_of(traj: Trajectory) -> str | None:
    """The answer the env parsed from the last turn (Math's ``verdict["parsed"]``), or None."""
    verdict = (traj.infos[-1].get("verdict") or {}) if traj.infos else {}
    parsed = verdict.get("parsed")
    return parsed if isinstance(parsed, str) and parsed.strip() else None


class MathEquivalence:
    """math-verify equivalence of two answers in the Math verifier's worker pool, under its deadline.

    The first answer is parsed as math-verify's gold (it is asymmetric). A comparison past the deadline
    counts as different; a worker fault too, and is counted in `faults` (logged as ``<component>/verifier_faults``)
    rather than failing the step's samples, whose answers are all still there.
    """

    def __init__(self, pool: WorkerPool | None = None):
        self._pool = pool
        self.faults = 0
        self._seen: dict[tuple[str, str], bool] = {}

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            self._pool = verifier_pool(workers=1)
        return self._pool

    def __call__(self, a: str, b: str) -> bool:
        if (a, b) not in self._seen:
            try:
                self._seen[(a, b)] = (
                    self.pool.call(a, b, max(1, int(self.pool.deadline_s * 0.6))) == "verified"
                )
            except DeadlineExceeded:
                self._seen[(a, b)] = False
            except InfrastructureError:
                self.faults += 1
                return False
        return self._seen[(a, b)]


class PseudoLabelReward:
    """A reward component: each group's pseudo-label from `labeller`, r_i = 1[a_i ≡ label], and the measures.

    `same` compares answers; `gold` (optional) gives a task's gold answer, to measure label accuracy only;
    `report()` returns the last call's metrics (the composer logs them).
    """

    def __init__(
        self,
        name: str,
        labeller: Labeller,
        same: Same,
        gold: Gold | None = None,
        collapse: CollapseMonitor | None = None,
    ):
        self.name = name
        self.labeller = labeller
        self.same = same
        self.gold = gold
        self.collapse = collapse or CollapseMonitor(name)
        self._report: dict[str, float] = {}

    def __call__(self, trajectories: Sequence[Trajectory]) -> list[float]:
        trajs = list(trajectories)
        groups: dict[int, list[int]] = {}
        for i, t in enumerate(trajs):
            groups.setdefault(t.group, []).append(i)
        answers = [answer_of(t) for t in trajs]
        votes = {g: majority_vote([answers[i] for i in idx], self.same) for g, idx in groups.items()}
        labels = self.labeller(trajs, groups, votes)
        rewards = [0.0] * len(trajs)
        for g, idx in groups.items():
            for i, r in zip(idx, agreement_rewards(votes[g].classes, labels.get(g), self.same)):
                rewards[i] = r
        self._report = self._measure(trajs, groups, votes, labels, rewards)
        return rewards

    def report(self) -> dict[str, float]:
        return dict(self._report)

    def _measure(
        self,
        trajs: list[Trajectory],
        groups: dict[int, list[int]],
        votes: dict[int, Vote],
        labels: dict[int, str | None],
        rewards: list[float],
    ) -> dict[str, float]:
        n, k = len(groups), self.name
        if not n:
            return {}
        vs = list(votes.values())
        out = {
            f"{k}/vote_share": sum(v.share for v in vs) / n,
            f"{k}/tie_frac": sum(v.outcome == "tie" for v in vs) / n,
            f"{k}/no_answer_frac": sum(v.outcome == "no_answer" for v in vs) / n,
            f"{k}/no_label_frac": sum(labels.get(g) is None for g in groups) / n,
            f"{k}/diversity": sum(answer_diversity(v.classes) for v in vs) / n,
            f"{k}/answer_entropy": sum(answer_entropy(v.classes) for v in vs) / n,
            f"{k}/reward_accuracy": sum((r > 0.5) == t.success for r, t in zip(rewards, trajs)) / len(trajs),
        }
        labelled = {g: lab for g, lab in labels.items() if lab is not None}
        if len(labelled) > 1:
            texts = Counter("".join(lab.split()) for lab in labelled.values())
            out[f"{k}/label_agreement"] = texts.most_common(1)[0][1] / len(labelled)
        accuracy = self._label_accuracy(trajs, groups, labelled)
        if accuracy is not None:
            out[f"{k}/label_accuracy"] = accuracy
        if isinstance(self.same, MathEquivalence):
            out[f"{k}/verifier_faults"] = float(self.same.faults)
        out.update(self.collapse.update(out[f"{k}/vote_share"], accuracy))
        return out

    def _label_accuracy(
        self, trajs: list[Trajectory], groups: dict[int, list[int]], labelled: dict[int, str]
    ) -> float | None:
        """Share of the labelled groups whose pseudo-label equals the gold answer (None: nothing to measure)."""
        if self.gold is None or not labelled:
            return None
        right = []
        for g, label in labelled.items():
            gold = self.gold(trajs[groups[g][0]].task_id)
            if gold is not None:
                right.append(gold.strip() == label.strip() or self.same(gold, label))
        return sum(right) / len(right) if right else None


def own_majority(
    trajs: list[Trajectory], groups: dict[int, list[int]], votes: dict[int, Vote]
) -> dict[int, str | None]:
    """TTRL: each group's label is its own majority answer."""
    return {g: v.label for g, v in votes.items()}


def rephrasing_majority(
    trajs: list[Trajectory], groups: dict[int, list[int]], votes: dict[int, Vote]
) -> dict[int, str | None]:
    """Co-rewarding-I: each group's label is the majority answer of its partner view's group (same task,
    the other phrasing; the nearest such group when a task was drawn twice); no partner in the batch (its
    samples all infrastructure failures, say): no label."""
    by_task: dict[str, list[int]] = {}
    for g, idx in groups.items():
        by_task.setdefault(trajs[idx[0]].task_id, []).append(g)
    out: dict[int, str | None] = {}
    for g, idx in groups.items():
        partners = by_task.get(partner_id(trajs[idx[0]].task_id), [])
        out[g] = votes[min(partners, key=lambda h: abs(h - g))].label if partners else None
    return out


class TeacherLabeller:
    """Co-rewarding-II: the EMA teacher's greedy answer to each group's prompt is the group's label.

    Each call first moves the teacher toward the policy (`EMATeacher.update`), so labels at step k come
    from θ_T,k = d·θ_T,k−1 + (1 − d)·θ_k; the prompt is the group's first trajectory's exact prompt tokens.
    """

    def __init__(self, policy: Any, decay: float, max_new_tokens: int):
        self.student = policy.model
        self.teacher = EMATeacher(policy.model, decay)
        self.generator = HFPolicy(self.teacher.model, policy.tokenizer)
        self.sampling = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)

    def __call__(
        self, trajs: list[Trajectory], groups: dict[int, list[int]], votes: dict[int, Vote]
    ) -> dict[int, str | None]:
        self.teacher.update(self.student)
        order = list(groups)
        prompts = [trajs[groups[g][0]].token_ids[: trajs[groups[g][0]].prompt_length] for g in order]
        if any(not p for p in prompts):
            raise ConfigError("co_reward_teacher needs token trajectories (a token policy's rollouts).")
        completions = self.generator.generate(prompts, self.sampling, seed=0)
        return {g: extract_answer(c.text) for g, c in zip(order, completions)}


def gold_answers(cfg: Any) -> Gold:
    """The run's task lookup as gold answers by task id (a rephrasing's is its original's), for measuring."""
    lookup = env_tasks(cfg.env.id, cfg.env.kwargs)

    def gold(task_id: str) -> str | None:
        try:
            return lookup(base_id(task_id)).answer
        except (TaskNotFoundError, ConfigError):
            return None

    return gold


def _component(context: RewardContext, name: str, labeller: Labeller) -> PseudoLabelReward:
    cfg = context.config
    lf = cfg.reward.label_free
    return PseudoLabelReward(
        name,
        labeller,
        MathEquivalence(),
        gold=gold_answers(cfg),
        collapse=CollapseMonitor(name, lf.collapse_window, lf.collapse_drop),
    )


@register_reward("majority")
def _majority(context: RewardContext) -> PseudoLabelReward:
    return _component(context, "majority", own_majority)


@register_reward("co_reward_data")
def _co_reward_data(context: RewardContext) -> PseudoLabelReward:
    return _component(context, "co_reward_data", rephrasing_majority)


@register_reward("co_reward_teacher")
def _co_reward_teacher(context: RewardContext) -> PseudoLabelReward:
    cfg = context.config
    teacher = TeacherLabeller(context.policy, cfg.reward.label_free.ema_decay, cfg.rollout.max_new_tokens)
    return _component(context, "co_reward_teacher", teacher)
