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
    cfg = LearnerConfig(advantage="gae", value_lr_scale=300.0, micro_batch_size=3, max_grad_norm=None, lr=1e-5)
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
