"""R³L: snapshots at the pivot, pivotal masks, guidance-free training copies, the credit rule, reflections."""

from __future__ import annotations

import pickle

import pytest
import torch

import argym
from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.rollout import RolloutEngine
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.algorithms.r3l import (
    Reflection,
    RuleReflector,
    amplify_positive,
    opmd_loss,
    parse_reflection,
    reflection_prompt,
    truncated_is_weight,
)
from argym.algorithms.r3l.reflection import FALLBACK_GUIDANCE, PolicyReflector
from argym.algorithms.r3l.retry import R3LConfig, R3LRollout, distill, mask_before, retry_start, turn_start
from argym.errors import ConfigError

from ..tiny_run import TINY_RUN

ENV = ("argym/Math-v0", {"tasks": "arithmetic(digits=2,ops=+,terms=2)", "max_attempts": 3})


@pytest.fixture(scope="module")
def policy():
    tok = build_tiny_tokenizer()
    return HFPolicy(
        build_tiny_model(
            tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64), seed=0
        ),
        tok,
        name="tiny",
    )


@pytest.fixture(scope="module")
def failed(policy):
    """Untrained tiny rollouts on 3-attempt Math: every one fails, with three turns and a snapshot per turn."""
    with RolloutEngine(*ENV, policy, SamplingParams(max_new_tokens=6)) as engine:
        tasks = [
            engine.task_source.sample(__import__("numpy").random.default_rng(0), "train") for _ in range(2)
        ]
        trajs = engine.run(tasks, group_size=2, seed=1, record_snapshots=True)
    assert all(not t.success and t.turns == 3 and len(t.snapshots) == 3 for t in trajs)
    return trajs


def test_snapshot_restores_the_exact_state_at_a_pivot_in_a_fresh_env(failed):
    traj = failed[0]
    actions = [m["content"] for m in traj.messages if m["role"] == "assistant"]
    for k in (1, 2):
        state = pickle.loads(pickle.dumps(traj.snapshots[k]))
        fresh = argym.make(ENV[0], **ENV[1])
        fresh.get_wrapper_attr("restore")(state)
        obs, reward, terminated, truncated, info = fresh.step(actions[k])
        assert obs == traj.messages[: len(obs)] and reward == traj.turn_rewards[k]
        assert terminated == (k == 2) and info["verdict"] == traj.infos[k]["verdict"]
        fresh.close()


def test_masks_before_the_pivot_are_zero_in_both_copies_and_guidance_is_never_trained_on(policy, failed):
    traj, k = failed[1], 1
    reflection = Reflection(k, "Add the tens first, then the ones.", root_cause="the sum was wrong")
    with RolloutEngine(*ENV, policy, SamplingParams(max_new_tokens=6)) as engine:
        start, plain = retry_start(traj, reflection, engine.renderer)
        guided = engine.resume([start], seed=3)[0]
    pivot = turn_start(traj, k)
    assert plain == traj.token_ids[:pivot] and guided.token_ids[: len(start.ids)] == start.ids
    guidance_ids = engine.renderer.encode(reflection.guidance)
    contains = lambda ids, sub: any(ids[i : i + len(sub)] == sub for i in range(len(ids) - len(sub) + 1))  # noqa: E731
    assert contains(guided.token_ids, guidance_ids)  # the retry was sampled with the guidance ...
    train = distill(guided, len(start.ids), plain)
    assert not contains(train.token_ids, guidance_ids)  # ... and is trained without it
    assert reflection.guidance not in policy.tokenizer.decode(train.token_ids)
    assert train.token_ids[:pivot] == traj.token_ids[:pivot]
    original = mask_before(traj, k)
    for copy in (train, original):
        assert sum(copy.loss_mask[:pivot]) == 0 and sum(copy.loss_mask[pivot:]) > 0
        assert copy.turn_ends[k] >= pivot and copy.loss_mask[copy.turn_ends[k]] == 1
    assert original.loss_mask[pivot:] == traj.loss_mask[pivot:]
    # the retried suffix keeps its sampled ids, log-probs and per-turn rewards, shifted onto the plain context
    shift = len(plain) - len(start.ids)
    assert train.token_ids[pivot:] == guided.token_ids[len(start.ids) :]
    assert [e + shift for e in guided.turn_ends[k:]] == train.turn_ends[k:]
    assert train.sampler_logprobs[pivot:] == guided.sampler_logprobs[len(start.ids) :]
    assert train.turn_rewards[:k] == traj.turn_rewards[:k] and len(train.turn_rewards) == train.turns


def test_r3l_rollout_splits_groups_and_reports_its_metrics(policy):
    with RolloutEngine(*ENV, policy, SamplingParams(max_new_tokens=6)) as engine:
        strategy = R3LRollout(engine, R3LConfig())
        tasks = [
            engine.task_source.sample(__import__("numpy").random.default_rng(5), "train") for _ in range(3)
        ]
        trajs, metrics = strategy.run(tasks, group_size=4, seed=2)
    assert [t.group for t in trajs] == sorted(t.group for t in trajs) and len(trajs) == 3 * 4
    for g in range(3):  # two ordinary (masked before their pivot: 0, so unchanged) and two retries per task
        assert sum(t.group == g for t in trajs) == 4
    assert metrics["r3l/retries"] == 6 and metrics["r3l/pivot_0"] == 1.0 and metrics["r3l/pivot_mean"] == 0.0
    assert 0 < metrics["r3l/retry_token_share"] < 1 and 0 <= metrics["r3l/retry_success"] <= 1
    assert all(not t.snapshots for t in trajs)  # snapshots do not travel into the learner
    with pytest.raises(ConfigError, match="leaves none"):
        R3LRollout(engine, R3LConfig()).run(tasks, group_size=1)


def test_rule_reflector_takes_the_pivot_from_the_verdicts():
    from argym.types import Trajectory

    def traj(infos):
        return Trajectory(
            task_id="t",
            messages=[],
            reward=0.0,
            success=False,
            turns=len(infos),
            terminated=True,
            truncated=False,
            infos=infos,
        )

    ok = {
        "verdict": {"phase": "sub_answer", "question": "2 * 3", "parsed": "6", "correct": True},
        "step_score": 1.0,
    }
    bad = {
        "verdict": {"phase": "sub_answer", "question": "6 + 4", "parsed": "11", "correct": False},
        "step_score": 0.0,
    }
    decomposed = {"verdict": {"phase": "decompose", "accepted": [], "rejected": []}}
    r = RuleReflector().reflect(
        [traj([decomposed, ok, bad, {"verdict": {"parsed": "11", "correct": False}}])]
    )[0]
    assert r.retry_from_step == 2 and "11" in r.guidance and "6 + 4" in r.guidance and r.fallback is None
    r = RuleReflector().reflect([traj([{"verdict": {"parsed": None, "correct": False}}])])[0]
    assert r.retry_from_step == 0 and "No boxed answer" in r.guidance
    r = RuleReflector().reflect([traj([decomposed, ok])])[0]
    assert r.retry_from_step == 1 and r.fallback == "no turn marked wrong"


@pytest.mark.parametrize(
    "text, why",
    [
        ("I think it went wrong somewhere.", "no JSON object"),
        ('{"retry_from_step": "two", "improvement_suggestion": "x"}', "not an integer"),
        ('{"retry_from_step": Infinity, "improvement_suggestion": "x"}', "not an integer"),
        ('{"retry_from_step": null, "improvement_suggestion": "x"}', "not an integer"),
        ('{"retry_from_step": [1], "improvement_suggestion": "x"}', "not an integer"),
        ('{"retry_from_step": 9, "improvement_suggestion": "check"}', "outside 0..2"),
        ('{"retry_from_step": 1}', "no improvement_suggestion"),
        ('{"retry_from_step": 1, "improvement_suggestion": "check", ', "no JSON object"),
        ("[1, 2]", "no JSON object"),
    ],
)
def test_malformed_reflections_fall_back_cleanly(text, why):
    r = parse_reflection(text, num_steps=3)
    assert why in r.fallback and 0 <= r.retry_from_step <= 2 and r.guidance


def test_a_well_formed_reflection_is_read():
    text = (
        'Sure.\n```json\n{"trajectory_summary": "added wrong", "root_cause_analysis": "carry lost", '
        '"trajectory_outcome": "failure", "improvement_suggestion": "carry the one", "retry_from_step": 1}\n```'
    )
    r = parse_reflection(text, num_steps=3)
    assert (r.retry_from_step, r.suggestion, r.root_cause, r.fallback) == (
        1,
        "carry the one",
        "carry lost",
        None,
    )
    assert "carry the one" in r.guidance and "carry lost" in r.guidance
    assert parse_reflection('{"retry_from_step": 0}', 1).suggestion == FALLBACK_GUIDANCE
    prompt = reflection_prompt(
        [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A"},
            {"role": "user", "content": "no"},
            {"role": "assistant", "content": "B"},
        ]
    )
    assert "[step 0] assistant: A" in prompt[0]["content"] and "0 to 1" in prompt[0]["content"]


def test_policy_reflector_falls_back_when_the_model_cannot_write_json(policy, failed):
    reflections = PolicyReflector(policy, max_tokens=12).reflect(failed[:2], seed=0)
    assert all(r.fallback is not None and r.retry_from_step == 0 for r in reflections)


def test_policy_reflections_are_sampled_at_the_rollout_temperature(policy):
    """Reflections are trained at the configured temperature, so they are sampled at it (not at 1.0):
    their sampler log-probs are the policy's at T = 0.5, recomputed here by a plain forward."""
    with RolloutEngine(*ENV, policy, SamplingParams(temperature=0.5, max_new_tokens=6)) as engine:
        strategy = R3LRollout(
            engine, R3LConfig(reflector="policy", reflection_max_tokens=8, train_reflections=True), policy
        )
        tasks = [
            engine.task_source.sample(__import__("numpy").random.default_rng(3), "train") for _ in range(2)
        ]
        trajs, _ = strategy.run(tasks, group_size=2, seed=5)
    reflections = [t for t in trajs if t.task_id.endswith("#reflection")]
    assert reflections
    for t in reflections:
        ids = torch.tensor([t.token_ids])
        with torch.no_grad():
            logits = policy.model(ids).logits[0, :-1].float() / 0.5  # position p predicts token p + 1
        want = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]
        gen = torch.tensor(t.loss_mask[1:]) > 0
        got = torch.tensor(t.sampler_logprobs[1:])
        assert (got[gen] - want[gen]).abs().max() < 1e-4


def test_positive_amplification_against_hand_computed_advantages():
    adv = torch.tensor([[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5], [0.2, 0.2, 0.0], [0.0, 0.0, 0.0]])  # (B, T)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    success = torch.tensor([True, False, False, False])
    out = amplify_positive(adv, mask, success, alpha=3.0)
    expected = torch.tensor(
        [
            [1.0, 1.0, 0.0],  # success: 1 on its policy tokens
            [-0.5, -0.5, -0.5],  # negative: unchanged
            [0.6, 0.6, 0.0],  # non-negative failure: × α
            [0.0, 0.0, 0.0],
        ]
    )  # zero stays zero
    assert torch.allclose(out, expected)


def test_learner_applies_amplification_at_step_five(policy, failed):
    from accelerate import Accelerator

    from argym.algorithms.learner import Learner, LearnerConfig

    trajs = [failed[0], failed[1]]
    trajs[1] = __import__("dataclasses").replace(failed[1], reward=1.0, success=True)
    plain = Learner(policy.model, LearnerConfig(lr=1e-4, advantage="drgrpo"), Accelerator()).prepare_batch(
        trajs, policy.pad_id
    )
    amp = Learner(
        policy.model, LearnerConfig(lr=1e-4, advantage="drgrpo", amplify_alpha=3.0), Accelerator()
    ).prepare_batch(trajs, policy.pad_id)
    m = plain.loss_mask > 0
    assert torch.allclose(plain.advantages[0][m[0]], torch.tensor(-0.5)) and torch.allclose(
        amp.advantages[0][m[0]], torch.tensor(-0.5)
    )
    assert torch.allclose(plain.advantages[1][m[1]], torch.tensor(0.5)) and torch.allclose(
        amp.advantages[1][m[1]], torch.tensor(1.0)
    )


def test_truncated_importance_weight_and_ratio_free_loss():
    old = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
    sampler = torch.log(torch.tensor([[0.25, 0.4, 0.9]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    w = truncated_is_weight(old, sampler, mask, torch.tensor([True]), cap=1.5)
    assert torch.allclose(w, torch.tensor([[1.5, 0.5, 1.0]]))  # min(2, 1.5), 0.2/0.4, off the mask: 1
    assert torch.allclose(
        truncated_is_weight(old, sampler, mask, torch.tensor([False]), cap=1.5), torch.ones(1, 3)
    )
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, clipped = opmd_loss(logp, logp.detach() + 5.0, torch.tensor([[2.0, -1.0]]), torch.ones(1, 2), None)
    assert torch.allclose(loss, torch.tensor([[1.0, -1.0]])) and not clipped.any()  # −A·logπ/(1+τ), τ = 1
    loss.sum().backward()
    assert torch.allclose(logp.grad, torch.tensor([[-1.0, 0.5]]))  # no ratio: π_old plays no part


def test_amplification_keeps_the_importance_weight_on_successes():
    """Step 5 amplifies first, then weights: a successful retry sampled off-policy keeps min(π_old/μ, C).
    The weight is the loss's alone: the batch keeps the amplified advantages."""
    from argym.algorithms.batch import TrainBatch
    from argym.algorithms.learner import LearnerConfig
    from argym.algorithms.r3l import credit_step, importance_weighted

    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    old = torch.log(torch.tensor([[0.2, 0.6, 0.5], [0.3, 0.3, 0.3]]))
    sampler = torch.log(torch.tensor([[0.4, 0.3, 0.5], [0.6, 0.6, 0.6]]))  # μ: the guided sampler
    batch = TrainBatch(
        input_ids=torch.zeros(2, 4, dtype=torch.long),
        attention_mask=torch.ones(2, 4, dtype=torch.long),
        loss_mask=mask,
        sampler_logprobs=sampler * mask,
        advantages=torch.tensor([[0.5, 0.5, 0.0], [0.1, 0.1, 0.1]]),
        rewards=torch.tensor([1.0, 0.0]),
        group_ids=torch.tensor([0, 0]),
        has_sampler_logprobs=torch.tensor([True, True]),
        positive=torch.tensor([True, False]),
        old_logprobs=old,
    )
    config = LearnerConfig(amplify_alpha=3.0, tis_cap=1.5)
    credit_step(batch, config)
    assert torch.allclose(batch.advantages, torch.tensor([[1.0, 1.0, 0.0], [0.3, 0.3, 0.3]]))  # amplified
    # success: Â := 1, then × min(π_old/μ, 1.5) = 0.5 and 1.5 (capped from 2); non-negative failure: 3·0.1 × 0.5
    weighted = importance_weighted(batch, config)
    assert torch.allclose(weighted, torch.tensor([[0.5, 1.5, 0.0], [0.15, 0.15, 0.15]]))
    assert torch.equal(
        importance_weighted(batch, LearnerConfig(amplify_alpha=3.0)), batch.advantages
    )  # no cap


def test_config_checks():
    with pytest.raises(ConfigError, match="reflector"):
        R3LConfig(reflector="oracle")
    with pytest.raises(ConfigError, match="retry_fraction"):
        R3LConfig(retry_fraction=1.0)
    from argym.algorithms.learner import LearnerConfig

    with pytest.raises(ConfigError, match="amplify_alpha"):
        LearnerConfig(amplify_alpha=0)
    assert LearnerConfig(policy_loss="opmd").policy_loss == "opmd"


SMALL = [
    *TINY_RUN,
    "rollout.tasks_per_step=3",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "eval.episodes=10",
    "eval.every=0",
    "algorithm.micro_batch_size=5",
    "steps=2",
    "checkpoint_every=2",
]


def test_r3l_trains_from_its_config(tmp_path):
    """`argym train configs/r3l_math.yaml` (small): the strategy, the credit rule and its metrics are wired in."""
    from pathlib import Path

    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    repo = Path(__file__).resolve().parents[2]
    cfg = load_config(
        repo / "configs" / "r3l_math.yaml",
        SMALL + [f"out_dir={tmp_path}", "algorithm.tis_cap=1.0", "algorithm.policy_loss=ppo_clip"],
    )
    assert cfg.rollout.strategy == "r3l" and cfg.algorithm.amplify_alpha == 3.0
    trainer = Trainer(cfg)
    assert trainer.learner.reuses_training_forward  # on-policy: the IS weight takes π_old from it
    try:
        metrics = trainer.train_step()
    finally:
        trainer.close()
    assert metrics["r3l/retries"] > 0 and "r3l/retry_token_share" in metrics
    # every trajectory rolled out is counted, retries included: 3 tasks × 2 ordinary rollouts + the retries
    assert metrics["train/trajectories"] == 3 * 2 + metrics["r3l/retries"]
    # untrained: all fail, A = 0, so the batch has no gradient and takes no AdamW step
    assert metrics["r3l/retry_success"] == 0.0 and metrics["train/adv_mean"] == 0.0
    assert metrics["train/grad_norm"] == 0.0 and metrics["train/optimizer_steps"] == 0.0
    with pytest.raises(ConfigError, match="strategy"):
        load_config(repo / "configs" / "r3l_math.yaml", ["rollout.strategy=retry"])


def test_reflections_become_training_samples_rewarded_by_improvement(policy):
    with RolloutEngine(*ENV, policy, SamplingParams(max_new_tokens=6)) as engine:
        strategy = R3LRollout(
            engine, R3LConfig(reflector="policy", reflection_max_tokens=8, train_reflections=True), policy
        )
        tasks = [
            engine.task_source.sample(__import__("numpy").random.default_rng(7), "train") for _ in range(2)
        ]
        trajs, metrics = strategy.run(tasks, group_size=2, seed=4)
    reflections = [t for t in trajs if t.task_id.endswith("#reflection")]
    assert len(reflections) == 2 and {t.group for t in reflections} == {2, 3}
    assert metrics["r3l/reflection_fallback"] == 1.0  # the untrained model writes no JSON
    for t in reflections:
        assert t.reward in (0.0, 1.0) and t.loss_mask[0] == 0 and 1 <= sum(t.loss_mask) <= 8
        assert "Reflect on it" in policy.tokenizer.decode(t.token_ids)
    with pytest.raises(ConfigError, match="needs the policy"):
        R3LRollout(engine, R3LConfig(reflector="policy"))
