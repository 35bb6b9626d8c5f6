"""VAPO's critic: value model on the policy architecture, clipped value loss, pretraining on MC returns."""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator

from argym.algorithms.learner import Learner, LearnerConfig
from argym.algorithms.value import Critic, ValueModel, value_loss

from .test_learner import random_trajs, tiny_model


def test_value_model_has_the_policy_architecture_and_separate_weights():
    policy = tiny_model()
    vm = ValueModel.from_policy(policy)
    body = dict(vm.body.named_parameters())
    for name, p in policy.model.named_parameters():
        assert torch.equal(body[name], p) and body[name].data_ptr() != p.data_ptr()
    ids = torch.tensor([[1, 2, 3, 4]])
    assert vm(ids, torch.ones_like(ids)).shape == (1, 4)
    assert torch.all(vm(ids) == 0)  # zero-initialised head


def test_value_loss_hand_computed():
    v = torch.tensor([[1.0, 0.0, 3.0]], requires_grad=True)
    old = torch.tensor([[0.5, 0.0, 2.0]])
    ret = torch.tensor([[2.0, 5.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    loss, clipped = value_loss(v, old, ret, mask, global_tokens=2, clip=0.2)
    # t0: (1−2)² = 1 vs clipped 0.7 → (0.7−2)² = 1.69 → 1.69; t2: (3−0)² = 9 vs 2.2 → 4.84 → 9
    assert loss.item() == pytest.approx(0.5 * (1.69 + 9.0) / 2)
    assert clipped.tolist() == [[True, False, False]]
    loss.backward()
    # t0 clipped: no grad; t2: 0.5·2·(3 − 0)/2 = 1.5
    torch.testing.assert_close(v.grad, torch.tensor([[0.0, 0.0, 1.5]]))


@pytest.mark.slow
def test_critic_fits_monte_carlo_returns_and_learner_uses_gae():
    cfg = LearnerConfig(
        advantage="gae", value_lr_scale=300.0, micro_batch_size=3, max_grad_norm=None, lr=1e-5
    )
    acc = Accelerator(cpu=True)
    critic = Critic(ValueModel.from_policy(tiny_model()), cfg, acc)
    learner = Learner(tiny_model(), cfg, acc, critic=critic)
    trajs = random_trajs(8)
    batch = learner.prepare_batch(trajs, pad_id=0, advantages=torch.zeros(8))
    targets = learner.value_targets(batch)
    # λ_critic = 1, γ = 1: the MC return, i.e. the outcome reward on every policy token
    torch.testing.assert_close(targets, batch.rewards[:, None] * batch.loss_mask)
    first = critic.update(batch, targets)
    for _ in range(30):  # value pretraining
        last = critic.update(batch, targets)
    assert last["value/loss"] < 0.2 * first["value/loss"]
    assert last["value/explained_var"] > 0.3 > first["value/explained_var"]
    metrics = learner.update(trajs, pad_id=0)  # GAE advantages with the critic's values, then a critic step
    assert "value/loss" in metrics and torch.isfinite(torch.tensor(metrics["train/loss"]))


def test_critic_lr_follows_the_actor_lr():
    """VAPO's critic lr is value_lr_scale × the actor's (§4.1: 2e-6 against 1e-6), whatever the recipe's lr."""
    from argym.algorithms.config import load_config

    for lr in (1e-6, 2e-4):
        cfg = load_config(None, ["algo=vapo", f"algorithm.lr={lr}"]).algorithm
        critic = Critic(ValueModel.from_policy(tiny_model()), cfg, Accelerator(cpu=True))
        assert critic.optimizer.param_groups[0]["lr"] == pytest.approx(2 * lr)


def test_vapo_critic_at_the_recipe_lr_reaches_its_target():
    """At the tiny recipe's lr (2e-4) the critic fits a constant return of 0.5 within 50 steps (the old
    absolute 2e-6 left it at ~0.006)."""
    from argym.algorithms.config import load_config

    cfg = load_config(None, ["algo=vapo", "algorithm.num_minibatches=1"]).algorithm  # 50 optimizer steps
    acc = Accelerator(cpu=True)
    critic = Critic(ValueModel.from_policy(tiny_model()), cfg, acc)
    batch = Learner(tiny_model(), cfg, acc).prepare_batch(
        random_trajs(4), pad_id=0, advantages=torch.zeros(4), old_logprobs=False
    )
    target = 0.5 * batch.loss_mask
    for _ in range(50):
        m = critic.update(batch, target)
    v = critic.values(batch)[batch.loss_mask > 0]
    assert abs(v.mean().item() - 0.5) < 0.1, v.mean().item()
    assert m["value/loss"] < 0.01


def test_vapo_lambda_on_short_answers_keeps_credit_flowing():
    """16-token answers: 1 − 1/(0.05·16) < 0, so without a floor λ = 0 and Â = [0, …, 0, r] for V = 0.
    The floor (lam_policy 0.95) gives Â_t = 0.95^(l−1−t)·r."""
    from argym.algorithms.advantages import AdvantageInputs, get_advantage
    from argym.algorithms.batch import make_batch
    from argym.algorithms.config import load_config

    from .test_learner import traj

    cfg = load_config(None, ["algo=vapo"]).algorithm
    batch = make_batch([traj(list(range(4, 20)), 1.0, 0)], torch.zeros(1), pad_id=0)
    batch.values = torch.zeros_like(batch.loss_mask)
    adv = get_advantage("gae")(AdvantageInputs.of(batch), cfg)[batch.loss_mask > 0]  # (16,)
    expected = torch.tensor([0.95 ** (15 - t) for t in range(16)])
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-6)
    long = make_batch([traj(list(range(4, 30)) * 20, 1.0, 0)], torch.zeros(1), pad_id=0)  # 520 tokens
    long.values = torch.zeros_like(long.loss_mask)
    lam = 1 - 1 / (0.05 * 520)  # the paper's own λ where it exceeds the floor
    adv = get_advantage("gae")(AdvantageInputs.of(long), cfg)[long.loss_mask > 0]
    assert adv[0].item() == pytest.approx(lam**519, rel=1e-4)


def test_vapo_trains_a_lora_policy(tmp_path):
    """VAPO with policy.lora_r > 0: the critic is a merged copy of the LoRA policy (it has a last_hidden_state)."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    from .test_presets import TINY

    cfg = load_config(
        None,
        TINY
        + [
            "algo=vapo",
            "policy.lora_r=4",
            "algorithm.value_pretrain_steps=1",
            "rollout.tasks_per_step=2",
            "steps=1",
            f"out_dir={tmp_path}",
        ],
    )
    trainer = Trainer(cfg)
    try:
        m = trainer.train_step()
    finally:
        trainer.close()
    assert torch.isfinite(torch.tensor(m["value/loss"])) and "value/explained_var" in m
    critic_params = list(trainer.learner.critic.model.parameters())
    assert critic_params and all(p.requires_grad for p in critic_params)
    assert not any("lora_" in n for n, _ in trainer.learner.critic.model.named_parameters())
