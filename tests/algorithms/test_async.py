"""rollout.mode=async: staleness 0 is sync exactly; staleness 2 bounds and records every trained token's lag,
R³L's and the Decomposer's too with partial rollouts; a fixed lag (rollout.partial=false) reproduces exactly
(that the tiny model still learns the quickstart task at staleness 2: test_learns.py)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
import torch

from argym.algorithms.config import load_config
from argym.algorithms.registry import STRATEGIES as STRATEGY_REGISTRY
from argym.algorithms.strategies import register_strategy
from argym.algorithms.trainer import Trainer
from argym.envs.rephrase import REPHRASED, base_id, partner_id
from argym.errors import ConfigError

from ..learner_updates import assert_lags_within, record_updates

SMALL = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.num_heads=2",
    "warm_start.steps=2",
    "warm_start.tasks=16",
    "warm_start.batch_size=8",
    "rollout.tasks_per_step=3",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "eval.episodes=10",
    "algorithm.micro_batch_size=5",
    "algorithm.num_minibatches=2",
]


def _informative(trainer, slow_s: float = 0.0) -> None:
    """The first sample of each group solves its task: every group is informative (a 2-step warm start solves
    nothing, and all-equal groups would give zero advantages and no update). `slow_s`: seconds each batch
    waits before its rollouts (a slow env, so that batches take longer than updates)."""
    runner = trainer.scheduler or trainer.engine  # async with staleness > 0 streams episodes
    run = runner.run

    def mixed(tasks, group_size, seed):
        time.sleep(slow_s)
        trajs = run(tasks, group_size=group_size, seed=seed)
        return [dataclasses.replace(t, reward=1.0) if i % group_size == 0 else t for i, t in enumerate(trajs)]

    runner.run = mixed


def _run(tmp_path, extra: list[str], slow_s: float = 0.0, informative: bool = True):
    """Train 3 steps; returns the trajectories each update got, the final weights and the metrics.
    `informative=False`: the rollouts as they come (a strategy's own; an entropy bonus gives the gradient)."""
    cfg = load_config(None, SMALL + ["steps=3", "eval.every=0", f"out_dir={tmp_path}"] + extra)
    trainer = Trainer(cfg)
    initial = [v.detach().clone() for v in trainer.policy.model.state_dict().values()]
    if informative:
        _informative(trainer, slow_s)
    batches = record_updates(trainer)
    try:
        trainer.fit()
    finally:
        trainer.close()
    weights = {k: v.detach().clone() for k, v in trainer.policy.model.state_dict().items()}
    assert any(not torch.equal(a, b) for a, b in zip(initial, weights.values())), (
        "the updates changed nothing"
    )
    return batches, weights, trainer.metrics.records()


def _key(t):
    return (t.token_ids, t.loss_mask, t.sampler_logprobs, t.policy_versions, t.reward, t.group, t.task_id)


@pytest.mark.parametrize("extra", [[], ["algorithm.tis_cap=2.0"]], ids=["plain", "tis"])
def test_async_staleness_0_equals_sync(tmp_path, extra):
    """Same trajectories (token ids, log-probs, versions, rewards) and the same weights after 3 steps."""
    sync, w_sync, m_sync = _run(tmp_path / "sync", extra)
    async_, w_async, m_async = _run(
        tmp_path / "async", extra + ["rollout.mode=async", "rollout.max_staleness=0"]
    )
    assert len(sync) == len(async_) == 3
    for step, (a, b) in enumerate(zip(sync, async_)):
        assert [_key(t) for t in a] == [_key(t) for t in b], f"step {step}"
        assert all(v == step for t in a for v, m in zip(t.policy_versions, t.loss_mask) if m)
    assert w_sync.keys() == w_async.keys()
    for k in w_sync:
        assert torch.equal(w_sync[k], w_async[k]), k
    for a, b in zip(m_sync, m_async):
        assert a["train/version_lag_max"] == b["train/version_lag_max"] == 0
        assert a["train/loss"] == b["train/loss"]


MATH = [
    "env.id=argym/Math-v0",
    "env.kwargs.tasks=arithmetic(digits=2,ops=+,terms=2)",
    "env.kwargs.max_attempts=2",
]
STRATEGIES = {
    # R³L: reflections by the policy, trained, and retries from the pivot turn
    "r3l": [*MATH, "rollout.strategy=r3l", "r3l.reflector=policy", "r3l.train_reflections=true"],
    # the Decomposer's hints (sampled by the policy, trained on their utility) and hinted sub-episodes
    "decomposer": [
        *MATH,
        "rollout.strategy=decomposer",
        "decomposer.hint_sets=1",
        "decomposer.hint_samples=2",
    ],
}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_strategies_at_async_staleness_0_equal_sync(tmp_path, strategy):
    """R³L and the Decomposer in async mode at staleness 0: the same trajectories token for token (ids, masks,
    log-probs, per-token versions) and weights as sync; every policy token, the reflections' and hints' too,
    records the version that sampled it (the agent programs' test: tests/agents/test_program.py)."""
    extra = [*STRATEGIES[strategy], "algorithm.entropy_coef=0.01", "rollout.max_new_tokens=4"]
    sync, w_sync, m_sync = _run(tmp_path / "sync", extra, informative=False)
    async_, w_async, _ = _run(
        tmp_path / "async", [*extra, "rollout.mode=async", "rollout.max_staleness=0"], informative=False
    )
    assert len(sync) == len(async_) == 3
    extra_samples = 0
    for step, (a, b) in enumerate(zip(sync, async_)):
        assert [_key(t) for t in a] == [_key(t) for t in b], f"step {step}"
        for t in a:
            assert len(t.policy_versions) == len(t.loss_mask), t.task_id
            assert all(v == step for v, m in zip(t.policy_versions, t.loss_mask) if m), t.task_id
        extra_samples += sum("#" in t.task_id for t in a)  # a reflection's or a hint's one-turn sample
    assert extra_samples > 0, "the strategy sampled nothing of its own: the test checks only plain rollouts"
    for k in w_sync:
        assert torch.equal(w_sync[k], w_async[k]), k
    assert all(r["train/version_lag_max"] == 0 for r in m_sync)


def test_async_staleness_2_bounds_and_records_the_lag(tmp_path):
    """Every trained token was sampled at most 2 versions before the learner's; the lag is in the metrics."""
    batches, _, records = _run(
        tmp_path, ["rollout.mode=async", "rollout.max_staleness=2", "algorithm.tis_cap=2.0", "steps=4"]
    )
    assert len(batches) == 4
    lags = []
    for step, trajs in enumerate(batches):
        step_lags = [step - v for t in trajs for v, m in zip(t.policy_versions, t.loss_mask) if m]
        assert step_lags and min(step_lags) >= 0 and max(step_lags) <= 2, (step, step_lags)
        assert all(v == -1 for t in trajs for v, m in zip(t.policy_versions, t.loss_mask) if not m)
        assert records[step]["train/version_lag_max"] == max(step_lags)
        assert records[step]["train/version_lag_mean"] == pytest.approx(np.mean(step_lags))
        lags += step_lags
    assert max(lags) >= 1, "batches ran ahead of the learner: some trained tokens are stale"
    assert all(np.isfinite(r["train/loss"]) for r in records)


PARTIAL_2 = ["rollout.mode=async", "rollout.max_staleness=2", "algorithm.tis_cap=2.0"]


def _fit_streamed(tmp_path, extra: list[str], patch=None):
    """Train 4 steps with partial rollouts at staleness 2 (`extra` on top; `patch(trainer)` first, if given):
    the strategy runs over the streaming scheduler and the updates change the weights. Returns the config, the
    batches each update got and the steps' metrics."""
    cfg = load_config(
        None,
        SMALL
        + [*extra, "algorithm.entropy_coef=0.01", "rollout.max_new_tokens=4", *PARTIAL_2]
        + ["steps=4", "eval.every=0", f"out_dir={tmp_path}"],
    )
    trainer = Trainer(cfg)
    assert trainer.scheduler is not None and trainer.strategy.engine is trainer.scheduler
    if patch is not None:
        patch(trainer)
    batches = record_updates(trainer)
    initial = [v.detach().clone() for v in trainer.policy.model.state_dict().values()]
    try:
        trainer.fit()
    finally:
        trainer.close()
    after = trainer.policy.model.state_dict().values()
    assert any(not torch.equal(a, b) for a, b in zip(initial, after)), "the updates changed nothing"
    records = [r for r in trainer.metrics.records() if "train/loss" in r]
    assert len(batches) == len(records) == 4
    return cfg, batches, records


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_strategies_stream_with_partial_rollouts(tmp_path, strategy):
    """R³L and the Decomposer with partial rollouts (staleness 2): the streaming scheduler runs their episodes
    (R³L's retries resumed from the env snapshot at their pivot, the Decomposer's hinted sub-episodes as a
    second phase), the run trains, every trained token records the version that sampled it (the reflections'
    and hints' too), no lag exceeds 2 and batches ran ahead (some lag ≥ 1)."""
    streamed = {"resumed": 0, "hinted": 0}

    def count(trainer):
        run, resume = trainer.scheduler.run, trainer.scheduler.resume

        def run_counted(tasks, *args, **kwargs):
            streamed["hinted"] += sum(
                (m.get("content") or "").startswith("Hints:") for t in tasks for m in t.prompt
            )
            return run(tasks, *args, **kwargs)

        def resume_counted(starts, *args, **kwargs):
            streamed["resumed"] += len(starts)
            return resume(starts, *args, **kwargs)

        trainer.scheduler.run, trainer.scheduler.resume = run_counted, resume_counted

    _, batches, records = _fit_streamed(tmp_path, STRATEGIES[strategy], count)
    assert streamed["resumed" if strategy == "r3l" else "hinted"] > 0, streamed
    assert_lags_within(batches, records, 2)
    extra_samples = sum("#" in t.task_id for trajs in batches for t in trajs)  # reflections', hints' samples
    assert extra_samples > 0, "the strategy sampled nothing of its own: the test checks only its episodes"


def test_paired_at_async_staleness_0_equals_sync(tmp_path):
    """Co-rewarding's paired views in async mode at staleness 0: the same trajectories token for token (each task
    and its rephrasing, adjacent groups) and the same weights as sync."""
    extra = [*MATH, "rollout.strategy=paired", "algorithm.entropy_coef=0.01", "rollout.max_new_tokens=4"]
    sync, w_sync, _ = _run(tmp_path / "sync", extra, informative=False)
    async_, w_async, _ = _run(
        tmp_path / "async", [*extra, "rollout.mode=async", "rollout.max_staleness=0"], informative=False
    )
    assert len(sync) == len(async_) == 3
    for step, (a, b) in enumerate(zip(sync, async_)):
        assert [_key(t) for t in a] == [_key(t) for t in b], f"step {step}"
        assert sum(t.task_id.endswith(REPHRASED) for t in a) == len(a) // 2, step  # half are rephrasings
    for k in w_sync:
        assert torch.equal(w_sync[k], w_async[k]), k


def test_paired_streams_with_partial_rollouts(tmp_path):
    """Co-rewarding's paired views with partial rollouts (staleness 2): through the streaming scheduler, every
    step's batch still holds each task and its rephrasing as adjacent groups (2k, 2k + 1) of `group_size`
    episodes, which `co_reward_data` reads; the run trains, each trained token records its version, no lag
    exceeds 2 and batches ran ahead."""
    cfg, batches, records = _fit_streamed(tmp_path, [*MATH, "rollout.strategy=paired"])
    k = cfg.rollout.group_size
    for step, trajs in enumerate(batches):
        groups: dict[int, set[str]] = {}
        for t in trajs:
            groups.setdefault(t.group, set()).add(t.task_id)
        assert sorted(groups) == list(range(2 * cfg.rollout.tasks_per_step)), (step, sorted(groups))
        assert all(len([t for t in trajs if t.group == g]) == k for g in groups), step
        for g in range(0, len(groups), 2):
            (original,), (rephrasing,) = groups[g], groups[g + 1]
            assert rephrasing == partner_id(original) and base_id(rephrasing) == original, (step, g)
    assert_lags_within(batches, records, 2)


FIXED_LAG_2 = [
    "rollout.mode=async",
    "rollout.max_staleness=2",
    "rollout.partial=false",
    "algorithm.tis_cap=2.0",
]


def test_async_fixed_lag_reproduces_exactly(tmp_path):
    """rollout.partial=false: step j trains a batch sampled whole at version max(0, j − 2), and a second run
    with the same seed gives the same trajectories, losses and weights (nothing depends on thread timing)."""
    first, w_first, m_first = _run(tmp_path / "a", FIXED_LAG_2 + ["steps=4"], slow_s=0.5)
    again, w_again, m_again = _run(tmp_path / "b", FIXED_LAG_2 + ["steps=4"])
    assert len(first) == len(again) == 4
    for step, (a, b) in enumerate(zip(first, again)):
        assert [_key(t) for t in a] == [_key(t) for t in b], f"step {step}"
        trained = {v for t in a for v, m in zip(t.policy_versions, t.loss_mask) if m}
        assert trained == {max(0, step - 2)}, (step, trained)
        assert m_first[step]["train/version_lag_max"] == min(step, 2)
        assert m_first[step]["train/loss"] == m_again[step]["train/loss"]
    for k in w_first:
        assert torch.equal(w_first[k], w_again[k]), k


def test_async_config_errors():
    with pytest.raises(ConfigError, match="tis_cap"):
        load_config(None, ["rollout.mode=async", "rollout.max_staleness=1"])
    # partial rollouts stream the strategies registered to (streams=True): a plugin registered without it
    register_strategy("unstreamed")(lambda cfg, engine, policy: None)
    try:
        with pytest.raises(ConfigError, match="streams=True"):
            load_config(
                None,
                [
                    "rollout.mode=async",
                    "rollout.strategy=unstreamed",
                    "rollout.max_staleness=1",
                    "algorithm.tis_cap=2",
                ],
            )
        load_config(None, ["rollout.mode=async", "rollout.strategy=unstreamed", "rollout.max_staleness=0"])
    finally:
        STRATEGY_REGISTRY.remove("unstreamed")
    for strategy in ("r3l", "decomposer", "paired"):  # staleness 0, or a fixed lag
        load_config(None, ["rollout.mode=async", f"rollout.strategy={strategy}", "rollout.max_staleness=0"])
        load_config(
            None,
            ["rollout.mode=async", f"rollout.strategy={strategy}", "rollout.max_staleness=1"]
            + ["rollout.partial=false", "algorithm.tis_cap=2"],
        )
    for strategy in ("plain", "r3l", "decomposer", "program", "paired"):  # registered with streams=True
        load_config(
            None,
            [
                "rollout.mode=async",
                f"rollout.strategy={strategy}",
                "rollout.max_staleness=1",
                "algorithm.tis_cap=2",
            ],
        )
    with pytest.raises(ConfigError, match="max_staleness"):
        load_config(None, ["rollout.max_staleness=-1"])
    with pytest.raises(ConfigError, match="rollout.mode"):
        load_config(None, ["rollout.mode=fast"])
    with pytest.raises(ConfigError, match="rollout.partial"):
        load_config(None, ["rollout.partial=sometimes"])
