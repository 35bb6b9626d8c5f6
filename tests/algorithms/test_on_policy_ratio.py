"""At θ = θ_old the ratio π_θ/π_old is 1, whatever the policy config (dropout, LoRA, bf16, a critic).

Each update below takes two mini-batches, so π_old comes from its own no-grad pass
(not from the training forward), and an lr of 1e-12 leaves the weights where they
were: any ratio ≠ 1 is a mismatch between how π_old and π_θ are computed. GSPO's
band (3e-4 / 4e-4, arXiv 2507.18071 §5.1) is the tightest clip there is.
"""

from __future__ import annotations

import pytest
import torch
from accelerate import Accelerator

from argym.algorithms.learner import Learner, LearnerConfig
from argym.algorithms.value import Critic, ValueModel

from .test_learner import PAD, random_trajs, tiny_model
from .test_prefix import shared_prompt_trajs

GSPO = dict(
    policy_loss="gspo", clip_low=3e-4, clip_high=4e-4, lr=1e-12, num_minibatches=2, micro_batch_size=3
)


def _dropout_model(p: float = 0.3):
    torch.manual_seed(0)
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attention_dropout=p,
    )
    return Qwen2ForCausalLM(cfg)


def _assert_ratio_one(metrics: dict[str, float]) -> None:
    assert metrics["train/clip_frac"] == 0.0
    assert abs(metrics["train/approx_kl"]) < 1e-9, metrics["train/approx_kl"]


def test_full_fine_tuning_with_attention_dropout_has_ratio_one():
    lrn = Learner(_dropout_model(), LearnerConfig(**GSPO), Accelerator(cpu=True))
    _assert_ratio_one(lrn.update(random_trajs(16), PAD))


def test_lora_with_dropout_has_ratio_one():
    import peft

    # init_lora_weights=False: B ≠ 0, as after some training (a fresh B = 0 hides the dropout)
    model = peft.get_peft_model(
        tiny_model(),
        peft.LoraConfig(
            r=4, lora_alpha=8, lora_dropout=0.3, target_modules=["q_proj", "v_proj"], init_lora_weights=False
        ),
    )
    lrn = Learner(model, LearnerConfig(**GSPO), Accelerator(cpu=True))
    _assert_ratio_one(lrn.update(random_trajs(16), PAD))


def test_vapo_critic_path_has_ratio_one():
    cfg = LearnerConfig(
        **{**GSPO, "policy_loss": "ppo_clip", "clip_low": 1e-4, "clip_high": 1e-4},
        advantage="gae",
        value_pretrain_steps=0,
    )
    acc = Accelerator(cpu=True)
    policy = _dropout_model()
    lrn = Learner(policy, cfg, acc, critic=Critic(ValueModel.from_policy(_dropout_model()), cfg, acc))
    _assert_ratio_one(lrn.update(random_trajs(16), PAD))
    # the critic, too, trains without dropout: its values at equal weights are its eval values
    batch = lrn.prepare_batch(random_trajs(16), PAD, advantages=torch.zeros(16))
    lrn.critic.model.train()
    v_train = lrn.critic.model(batch.input_ids, batch.attention_mask)[:, :-1].detach()
    torch.testing.assert_close(v_train * batch.loss_mask, batch.values * batch.loss_mask)


@pytest.fixture
def fresh_accelerator_state():
    """accelerate keeps one process-wide state; a bf16 Accelerator needs it fresh, and leaves it fresh."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


@pytest.mark.parametrize("share_prompt_forward", [True, False])
def test_bf16_pi_old_and_pi_theta_take_the_same_path(share_prompt_forward, fresh_accelerator_state):
    """Shared-prompt forward and micro-batch partition: in bf16 a different path differs by ~1e-3 per
    token, which trips GSPO's 3e-4 band; on the same path the ratio at θ = θ_old is exactly 1."""
    acc = Accelerator(cpu=True, mixed_precision="bf16")
    lrn = Learner(tiny_model(), LearnerConfig(**GSPO, share_prompt_forward=share_prompt_forward), acc)
    _assert_ratio_one(lrn.update(shared_prompt_trajs(), PAD))
