"""Reward composition: named components with weights, each logged under its name.

Components (`REWARD_COMPONENTS`, a registry: `@register_reward("mine")` adds one from user code):
- ``outcome``: the env's own reward (the verifiable outcome), on the turns where
  the env gave it, times its weight (PURE's `verifiable_reward_coef`);
- ``format``: 1 if the last turn was readable (a parsed answer, no action or
  tool error; and boxed, where the verdict says whether it was: Math with
  ``answer_format=final``), else 0;
- ``overlong``: DAPO's soft overlong penalty (arXiv 2503.14476 eq. 13) of the longest turn, in policy tokens;
- ``process``: a PRM's step rewards, credited by `credit` (PURE's min-form by
  default) and placed on each step's last token;
- ``sar``: the Self-Aligned Reward from the policy's own log-probs (arXiv 2509.05489);
- ``majority``, ``co_reward_data``, ``co_reward_teacher``: pseudo-labels without gold answers (TTRL's
  majority vote, Co-rewarding I and II), and ``reward_model``: a classifier refit on the policy's samples
  with a label budget (CoRLHF); argym.algorithms.pseudo_labels and co_trained_rm, docs/label_free.md.

A component is registered as a builder `(RewardContext) -> scorer`: the scorer maps a
batch of trajectories to one float each (`SequenceComponent`), built once per run from
the run's config and policy (overlong reads the token limits, SAR the policy). ``outcome``
and ``process`` are the composer's own (their builders give None): the env's reward and
the PRM's step rewards placed on tokens.

Weight 0 means logged, not trained on. A component that raises
`InfrastructureError` (a harness fault: a PRM server down, a grader crash) marks
that trajectory `infra_failure` (dropped by the learner and counted), never a
silent 0. Sequence-level components land on the last policy token (the
learner puts `reward − Σ turn_rewards` there); step rewards on their step ends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from argym.callables import load_function
from argym.errors import ConfigError, InfrastructureError
from argym.registry import Registry
from argym.rewards.credit import credit_rewards, token_loo_baseline
from argym.rewards.custom import Score, TaskLookup, callable_component, is_callable_spec
from argym.rewards.label_free_config import LabelFreeConfig, RewardModelConfig
from argym.rewards.overlong import longest_turn, overlong_penalty
from argym.rewards.prm import ProcessRewardModel
from argym.rewards.steps import DEFAULT_SEPARATOR, Step, split_steps
from argym.stats import within_group_correlation
from argym.types import Trajectory

SequenceComponent = Callable[[list[Trajectory]], Sequence[Score]]
"""Scores each trajectory with one float (format, overlong, SAR); may raise InfrastructureError. A scorer with a
`report()` method has its returned metrics logged after each call (a pseudo-label's vote share)."""


@dataclass(frozen=True)
class RewardContext:
    """What a component's builder may read: the run's config (a `TrainConfig`) and the policy it trains."""

    config: Any
    policy: Any = None


ComponentBuilder = Callable[[RewardContext], SequenceComponent | None]
"""`(context) -> scorer`; None for the composer's own components (outcome, process)."""

REWARD_COMPONENTS: Registry[ComponentBuilder] = Registry(
    "reward component",  # built-ins whose builders need the policy or the env: registered on first use
    {
        **dict.fromkeys(
            ("majority", "co_reward_data", "co_reward_teacher"), "argym.algorithms.pseudo_labels"
        ),
        "reward_model": "argym.algorithms.co_trained_rm",
    },
)
register_reward = REWARD_COMPONENTS.register
OWN_COMPONENTS = ("outcome", "process")
"""Scored by the composer itself (the env's reward; the PRM's step rewards on their tokens)."""


@dataclass
class RewardConfig:
    """Which reward components are trained on and how (the `reward:` section of a recipe)."""

    weights: dict[str, float] = field(default_factory=lambda: {"outcome": 1.0})
    """Component → weight: outcome, format, overlong, process, sar, a registered one, or a user's function as
    ``module:function`` (trajectory → float or dict of named floats; rewards/custom.py); 0 = logged only.
    A recipe's weights are merged into the default {outcome: 1}, so `outcome: 0` trains without it."""
    prm: str = "rule"
    """The process reward model: rule | hf:PATH (a sequence-classification checkpoint, e.g. an AgentPRM) | a registered name."""
    credit: str = "min"
    """Credit of step rewards: min (PURE soft min-form, arXiv 2504.15275) | strict (exact min) | sum (the γ-sum)."""
    credit_temperature: float = 0.1
    """T of min-form's softmax(−r/T) weights (PURE's default 0.1; → 0 gives the min)."""
    process_baseline: str = "none"
    """none | token_loo: PURE's per-token leave-one-out baseline on the step rewards, within each group."""
    separator: str = DEFAULT_SEPARATOR
    """Splits a single-turn answer into steps (multi-turn: one step per assistant turn)."""
    label_free: LabelFreeConfig = field(default_factory=LabelFreeConfig)
    """Pseudo-label components (majority, co_reward_data, co_reward_teacher): EMA teacher, collapse check."""
    reward_model: RewardModelConfig = field(default_factory=RewardModelConfig)
    """The co-trained ``reward_model`` component: refit schedule and label budget."""

    def __post_init__(self) -> None:
        if not isinstance(self.weights, dict):
            raise ConfigError(f"reward.weights must map component names to weights, got {self.weights!r}.")
        for name, w in self.weights.items():
            if is_callable_spec(name):  # a user's `module:function` (rewards/custom.py)
                load_function(name, f"reward.weights key {name!r}")
            else:
                REWARD_COMPONENTS.check(name, "reward.weights")
            if isinstance(w, bool) or not isinstance(w, (int, float)):
                raise ConfigError(f"reward.weights.{name} must be a number, got {w!r}.")
        if self.credit not in ("min", "strict", "sum"):
            raise ConfigError(f"reward.credit must be min, strict or sum, got {self.credit!r}.")
        if self.credit_temperature <= 0:
            raise ConfigError(
                f"reward.credit_temperature must be > 0, got {self.credit_temperature}; PURE uses 0.1."
            )
        if self.process_baseline not in ("none", "token_loo"):
            raise ConfigError(
                f"reward.process_baseline must be none or token_loo, got {self.process_baseline!r}."
            )
        if not self.separator:
            raise ConfigError("reward.separator must be a non-empty string (default a blank line).")

    def weight(self, name: str) -> float:
        return float(self.weights.get(name, 0.0))


def outcome_reward(traj: Trajectory) -> float:
    """The env's own reward: the sum of its per-turn rewards (the learner's view before shaping)."""
    return float(sum(traj.turn_rewards)) if traj.turn_rewards else float(traj.reward)


def format_reward(traj: Trajectory) -> float:
    """1 if the last turn was readable: no action or tool error, a parsed answer where the env parses one,
    and a boxed one where the env grades unboxed answers too (Math's ``answer_format=final`` says ``boxed``)."""
    verdict = (traj.infos[-1].get("verdict") or {}) if traj.infos else {}
    if verdict.get("error") or verdict.get("tool_errors"):
        return 0.0
    if "parsed" in verdict and verdict["parsed"] is None:
        return 0.0
    if verdict.get("boxed") is False:
        return 0.0
    return 1.0


@register_reward("outcome")
@register_reward("process")
def _own(context: RewardContext) -> None:
    """The composer scores these itself."""
    return None


@register_reward("format")
def _format(context: RewardContext) -> SequenceComponent:
    return lambda trajs: [format_reward(t) for t in trajs]


@register_reward("overlong")
def _overlong(context: RewardContext) -> SequenceComponent:
    """DAPO's soft overlong penalty of the longest turn (rewards/overlong.py), L_max from the run's config."""
    run = context.config
    if run.sampling.overlong:
        raise ConfigError(
            "The overlong penalty is on twice: as reward.weights.overlong and as sampling.overlong "
            "(DAPO's). Keep one (set sampling.overlong=false or drop the reward component)."
        )
    limits = run.sampling.overlong_limits(run.rollout.max_new_tokens)
    return lambda trajs: [overlong_penalty(longest_turn(t), *limits) for t in trajs]


@register_reward("sar")
def _sar(context: RewardContext) -> SequenceComponent:
    """The Self-Aligned Reward from the trained policy's own log-probs (rewards/sar.py)."""
    from argym.rewards.sar import sar_rewards

    policy = context.policy
    empty = policy.renderer.prompt_ids([{"role": "user", "content": ""}])  # "the answer alone"
    return lambda trajs: sar_rewards(policy.model, trajs, empty, policy.pad_id)


class RewardComposer:
    """Applies a `RewardConfig` to a batch of trajectories: `(trajectories) -> (shaped copies, metrics)`.

    `sequence` holds the callables of the sequence-level components that need
    more than the trajectory (overlong needs the token limits, SAR the policy);
    `prm` scores steps and `decode` (the policy tokenizer's) maps single-turn
    segments to tokens; `tasks` finds an episode's task for a ``module:function``
    reward that takes one (rewards/custom.py). A shaped copy has `reward` = Σ weight · component (any
    part of the incoming reward that is not the env's, e.g. DAPO's overlong
    penalty added by the sampler, is kept) and, where steps are scored,
    `turn_rewards`/`turn_ends` listing every rewarded position (turn ends and
    step ends) so the learner finds each reward on its token.
    """

    def __init__(
        self,
        config: RewardConfig,
        sequence: dict[str, SequenceComponent] | None = None,
        prm: ProcessRewardModel | None = None,
        decode: Callable[[list[int]], str] | None = None,
        tasks: TaskLookup | None = None,
    ):
        self.config = config
        self.sequence = {"format": lambda ts: [format_reward(t) for t in ts], **(sequence or {})}
        for name in config.weights:
            if is_callable_spec(name) and name not in self.sequence:
                self.sequence[name] = callable_component(name, tasks)
        for name in config.weights:
            if name not in OWN_COMPONENTS and name not in self.sequence:
                raise ConfigError(
                    f"reward component {name!r} needs a scorer from the trainer; none was given."
                )
        self.prm = prm
        self.decode = decode
        if "process" in config.weights and prm is None:
            raise ConfigError("reward component 'process' needs a PRM (reward.prm: rule | hf:PATH).")

    def __call__(self, trajectories: Sequence[Trajectory]) -> tuple[list[Trajectory], dict[str, float]]:
        cfg = self.config
        trajs = list(trajectories)
        if (
            set(cfg.weights) == {"outcome"} and cfg.weight("outcome") == 1.0
        ):  # nothing to shape: leave them as is
            counted = [t for t in trajs if not t.infra_failure]
            return trajs, (
                {"reward/outcome": sum(outcome_reward(t) for t in counted) / len(counted)} if counted else {}
            )
        failed = [t.infra_failure for t in trajs]
        values: dict[str, list[float]] = {"outcome": [outcome_reward(t) for t in trajs]}
        parts: dict[str, list[float]] = {}  # "<component>/<part>" → per trajectory, logged only
        metrics: dict[str, float] = {}
        for name in cfg.weights:
            if name in self.sequence:
                values[name] = self._sequence(name, trajs, failed, metrics, parts)
        steps: list[list[Step]] = [[] for _ in trajs]
        step_rewards: list[list[float]] = [[] for _ in trajs]
        if "process" in cfg.weights:
            steps, step_rewards = self._process(trajs, failed, metrics)
        out = []
        for i, t in enumerate(trajs):
            if failed[i]:
                out.append(dataclasses.replace(t, infra_failure=True))
                continue
            out.append(self._shape(t, {k: v[i] for k, v in values.items()}, steps[i], step_rewards[i]))
        ok = [i for i, f in enumerate(failed) if not f]
        for name, v in {**values, **parts}.items():
            if ok:
                metrics[f"reward/{name}"] = sum(v[i] for i in ok) / len(ok)
        if ok:
            metrics["reward/total"] = sum(out[i].reward for i in ok) / len(ok)
            groups = [(trajs[i].task_id, trajs[i].group) for i in ok]
            success = [float(trajs[i].success) for i in ok]
            ranked = {
                **values,
                **({"process": [sum(r) for r in step_rewards]} if "process" in cfg.weights else {}),
            }
            for name, v in ranked.items():
                if name == "outcome":
                    continue
                # does the term rank a group's samples as correctness does? (None: no variation to rank)
                corr = within_group_correlation([v[i] for i in ok], success, groups)
                if corr is not None:
                    metrics[f"reward/{name}_success_corr"] = corr
        metrics["reward/infra_failures"] = float(sum(failed) - sum(t.infra_failure for t in trajs))
        return out, metrics

    def _sequence(
        self,
        name: str,
        trajs: list[Trajectory],
        failed: list[bool],
        metrics: dict[str, float],
        parts: dict[str, list[float]],
    ) -> list[float]:
        """One component over the batch's trajectories that are not infra failures already (one whose env never
        started has no tokens to score; it gets 0.0, unused); on a harness fault, each alone to find which failed.
        A score that is a dict of named parts counts as their sum; each part goes into `parts`."""
        live = [i for i, f in enumerate(failed) if not f]
        vals = [0.0] * len(trajs)

        def put(i: int, score: Any) -> None:
            if isinstance(score, dict):
                for part, v in score.items():
                    parts.setdefault(f"{name}/{part}", [0.0] * len(trajs))[i] = float(v)
                score = sum(score.values())
            vals[i] = float(score)

        if not live:
            return vals
        scorer = self.sequence[name]
        try:
            for i, v in zip(live, scorer([trajs[i] for i in live])):
                put(i, v)
            report = getattr(scorer, "report", None)
            if report is not None:
                metrics.update(report())
        except InfrastructureError:
            for i in live:
                try:
                    put(i, self.sequence[name]([trajs[i]])[0])
                except InfrastructureError:
                    failed[i] = True
                    vals[i] = 0.0
                    metrics[f"reward/{name}_infra_failures"] = (
                        metrics.get(f"reward/{name}_infra_failures", 0) + 1
                    )
        return vals

    def _process(
        self, trajs: list[Trajectory], failed: list[bool], metrics: dict[str, float]
    ) -> tuple[list[list[Step]], list[list[float]]]:
        """Steps, PRM scores, credit transform and (optionally) the per-token LOO baseline per group."""
        cfg = self.config
        assert self.prm is not None
        steps: list[list[Step]] = []
        raw: list[list[float | None]] = []
        for i, t in enumerate(trajs):
            s = split_steps(t, cfg.separator, self.decode)
            r: list[float | None]
            try:  # None: the PRM has no opinion on that step (kept out of min-form's minimum)
                r = (
                    [None if x is None else float(x) for x in self.prm.score(t, s)]
                    if not failed[i]
                    else [0.0] * len(s)
                )
            except InfrastructureError:
                failed[i] = True
                r = [0.0] * len(s)
                metrics["reward/process_infra_failures"] = metrics.get("reward/process_infra_failures", 0) + 1
            if len(r) != len(s):
                raise ValueError(f"PRM gave {len(r)} rewards for {len(s)} steps of {t.task_id!r}.")
            steps.append(s)
            raw.append(r)
        credited = [credit_rewards(r, cfg.credit, cfg.credit_temperature) for r in raw]
        if cfg.process_baseline == "token_loo":
            groups: dict[int, list[int]] = {}
            for i, t in enumerate(trajs):
                if not failed[i]:
                    groups.setdefault(t.group, []).append(i)
            for members in groups.values():
                based = token_loo_baseline(
                    [credited[i] for i in members],
                    [[max(s.num_tokens, 1) for s in steps[i]] for i in members],
                )
                for i, b in zip(members, based):
                    credited[i] = b
        ok = [i for i, f in enumerate(failed) if not f]
        if ok:  # `process`: the credited sum a trajectory gets (before the weight); min/sum: the raw scores'
            metrics["reward/process"] = sum(sum(credited[i]) for i in ok) / len(ok)
            metrics["reward/process_steps"] = sum(len(steps[i]) for i in ok) / len(ok)
            scored = {i: [x for x in raw[i] if x is not None] for i in ok}
            metrics["reward/process_min"] = sum(min(scored[i], default=0.0) for i in ok) / len(ok)
            metrics["reward/process_sum"] = sum(sum(scored[i]) for i in ok) / len(ok)
        return steps, credited

    def _shape(
        self, t: Trajectory, values: dict[str, float], steps: list[Step], step_rewards: list[float]
    ) -> Trajectory:
        cfg = self.config
        w_out = cfg.weight("outcome")
        extra = float(t.reward) - values["outcome"]  # e.g. DAPO's overlong penalty, added before us
        seq = sum(cfg.weight(k) * v for k, v in values.items() if k != "outcome")
        positions: dict[int, float] = {}
        for r, end in zip(t.turn_rewards, t.turn_ends):
            positions[end] = positions.get(end, 0.0) + w_out * r
        w_proc = cfg.weight("process")
        process_total = 0.0
        for s, r in zip(steps, step_rewards):
            if s.end < 0:  # no token span (a message agent): the reward joins the sequence-level part
                process_total += w_proc * r
                continue
            positions[s.end] = positions.get(s.end, 0.0) + w_proc * r
        if not t.turn_ends:  # no token data (a message agent): nothing to place on tokens
            return dataclasses.replace(t, reward=w_out * values["outcome"] + process_total + seq + extra)
        ends = sorted(positions)
        turn_rewards = [positions[e] for e in ends]
        return dataclasses.replace(
            t,
            reward=sum(turn_rewards) + process_total + seq + extra,
            turn_rewards=turn_rewards,
            turn_ends=ends,
        )
