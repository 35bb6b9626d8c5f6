"""Rollout strategies: how a step's groups are sampled, by name (`rollout.strategy`).

A strategy is an object with ``run(tasks, group_size, seed) -> (trajectories, metrics)``;
a registered *builder* makes it from the run's config, its rollout engine and policy::

    @register_strategy("my_retry", counts=("my_retry/retries",))
    def build(cfg, engine, policy):
        return MyRetry(engine)

`counts` names the metrics that are counts: when DAPO's dynamic sampling draws
several rounds in one step, each round's metrics are combined by `combine_metrics`
(counts summed, every other metric averaged over the rounds).

`streams=True` says the strategy also runs with partial rollouts (async, `max_staleness > 0`,
`partial: true`): its builder then gets the streaming scheduler (agents/scheduler.py) as its
engine, which runs its episodes one by one (`run`, `resume`: the calls of `EpisodeRunner`, agents/rollout.py), and its
`run` may be called by several batches in flight at once, so it keeps no state between calls.
A strategy registered without it runs in async mode at staleness 0 or a fixed lag only.

This module imports no torch (a config names a strategy and is validated here
without loading a model); the built-in strategies import their modules when built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from argym.algorithms.registry import STRATEGIES as STRATEGIES  # this module's table, re-exported
from argym.types import Task, Trajectory

if TYPE_CHECKING:
    from argym.agents.rollout import EpisodeRunner
    from argym.algorithms.config import TrainConfig


class RolloutStrategy(Protocol):
    """Samples `group_size` trajectories for each task and says what it did (metrics by name).

    A strategy that holds resources of its own (an agent program's endpoint and envs) also has a
    `close()`, which the trainer calls through `release`."""

    def run(
        self, tasks: list[Task], group_size: int, seed: int = 0
    ) -> tuple[list[Trajectory], dict[str, float]]: ...


StrategyBuilder = Callable[["TrainConfig", "EpisodeRunner", Any], RolloutStrategy]
"""`(cfg, engine, policy) -> strategy`: engine is the rollout engine, or the streaming scheduler for a strategy
registered with `streams=True` under partial rollouts; policy is the trained `HFPolicy`."""


@dataclass(frozen=True)
class StrategyEntry:
    """A registered strategy: its builder, which of its metrics are counts (summed across draws), and whether
    it runs with partial rollouts (`streams`: see the module docstring)."""

    build: StrategyBuilder
    counts: frozenset[str] = frozenset()
    streams: bool = False


def register_strategy(
    name: str, counts: Sequence[str] = (), streams: bool = False
) -> Callable[[StrategyBuilder], StrategyBuilder]:
    """Decorator filing a strategy builder under `name` (``rollout.strategy: NAME``); returns it unchanged."""

    def deco(build: StrategyBuilder) -> StrategyBuilder:
        STRATEGIES.add(name, StrategyEntry(build, frozenset(counts), streams), module=build.__module__)
        return build

    return deco


def build_strategy(cfg: TrainConfig, engine: EpisodeRunner, policy: Any) -> RolloutStrategy:
    """The rollout strategy `cfg.rollout.strategy` names, built for this run over `engine` (the rollout engine,
    or the streaming scheduler)."""
    entry: StrategyEntry = STRATEGIES.get(cfg.rollout.strategy)
    return entry.build(cfg, engine, policy)


def combine_metrics(
    draws: Sequence[dict[str, float]], counts: frozenset[str] = frozenset()
) -> dict[str, float]:
    """One step's strategy metrics from those of its rollout rounds (DAPO's dynamic sampling draws several).

    A metric named in `counts` is summed (retries over the step); any other is the
    mean over the rounds that report it (each round rolls out the same number of
    tasks, so a per-task rate keeps its meaning).
    """
    total: dict[str, float] = {}
    seen: dict[str, int] = {}
    for metrics in draws:
        for key, value in metrics.items():
            total[key] = total.get(key, 0.0) + float(value)
            seen[key] = seen.get(key, 0) + 1
    return {k: v if k in counts else v / seen[k] for k, v in total.items()}


def release(strategy: RolloutStrategy) -> None:
    """Close what `strategy` holds, if it holds anything (see `RolloutStrategy`)."""
    close = getattr(strategy, "close", None)
    if close is not None:
        close()


class PlainRollout:
    """`group_size` independent episodes per task from the engine: GRPO's sampling."""

    def __init__(self, engine: EpisodeRunner):
        self.engine = engine

    def run(
        self, tasks: list[Task], group_size: int, seed: int = 0
    ) -> tuple[list[Trajectory], dict[str, float]]:
        return self.engine.run(tasks, group_size=group_size, seed=seed), {}


@register_strategy("plain", streams=True)
def _plain(cfg: TrainConfig, engine: EpisodeRunner, policy: Any) -> RolloutStrategy:
    return PlainRollout(engine)


@register_strategy("r3l", counts=("r3l/retries",), streams=True)
def _r3l(cfg: TrainConfig, engine: EpisodeRunner, policy: Any) -> RolloutStrategy:
    from argym.algorithms.r3l.retry import R3LRollout

    return R3LRollout(engine, cfg.r3l, engine.agent)  # reflections sampled by the run's generator


@register_strategy("decomposer", counts=("decomposer/distilled",), streams=True)
def _decomposer(cfg: TrainConfig, engine: EpisodeRunner, policy: Any) -> RolloutStrategy:
    from argym.algorithms.decomposer import UtilityDecomposer

    return UtilityDecomposer(engine, cfg.decomposer, engine.agent)  # hints sampled by the run's generator


@register_strategy("program", streams=True)  # its own endpoint's episodes; envs pooled across batches
def _program(cfg: TrainConfig, engine: EpisodeRunner, policy: Any) -> RolloutStrategy:
    from argym.agents.program import ProgramRunner

    return ProgramRunner.from_config(
        cfg.env.id,
        {**cfg.env.kwargs, "split": "train"},
        engine.agent,
        cfg.agent,
        engine.sampling,
        engine.max_total_tokens,
        training=True,
    )
