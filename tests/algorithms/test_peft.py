"""What TRL users expect of the learner: LoRA through peft, gradient checkpointing."""

from __future__ import annotations

import torch
from accelerate import Accelerator

from argym.algorithms.learner import Learner, LearnerConfig

from .test_learner import PAD, grads, random_trajs, tiny_model


def _grad_after_one_backward(model, **cfg):
    lrn = Learner(model, LearnerConfig(micro_batch_size=3, **cfg), Accelerator(cpu=True))
    batch = lrn.prepare_batch(random_trajs(), PAD)
    batch.old_logprobs -= 0.1 * batch.loss_mask
    lrn.backward(batch)
    return lrn


def test_gradient_checkpointing_gives_the_same_gradient():
    plain = grads(_grad_after_one_backward(tiny_model()))
    model = tiny_model()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ckpt = grads(_grad_after_one_backward(model))
    for a, b in zip(ckpt, plain):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_lora_trains_only_the_adapters():
    import peft

    model = peft.get_peft_model(
        tiny_model(),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0),
    )
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    lrn = Learner(model, LearnerConfig(lr=1e-2, micro_batch_size=4), Accelerator(cpu=True))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    metrics = lrn.update(random_trajs(), PAD)
    assert metrics["train/grad_norm"] > 0
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
    assert any(not torch.equal(p, before[n]) for n, p in model.named_parameters() if n in before)
