"""TRL's `GRPOTrainer` set up as argym's GRPO, shared by the benchmarks that race the two.

Both sides then run the same algorithm: no KL term (``beta=0``), ``loss_type="grpo"`` (argym's default
seq-mean-token-mean with group-std advantages), a constant learning rate without warm-up, no checkpoints, the
data in order.
"""

from __future__ import annotations

from typing import Any

TIMED = {"temperature": 1.0, "epsilon": 0.2, "max_grad_norm": 1.0, "logging_steps": 10**6}
"""The `GRPOConfig` fields of the step-time races (`vs_trl.py`, `gpu_step.py`): sampling at temperature 1, PPO's
clip of 0.2, and no logging inside the timed steps."""


def grpo_trainer(
    model: Any,
    tok: Any,
    reward: Any,
    data: Any,
    callback: Any,
    *,
    prompts: int,
    group: int,
    new_tokens: int,
    seed: int,
    peft_config: Any = None,
    micro_batch: int = 0,
    rollout_func: Any = None,
    **config: Any,
) -> Any:
    """A `GRPOTrainer` taking `prompts` x `group` completions of `new_tokens` a step; `config` holds the
    `GRPOConfig` fields the benchmark sets itself (output dir, device, learning rate, steps, clipping).

    `micro_batch` > 0 splits a step's completions into forward/backward passes of that many, still one
    optimizer step per generation (as argym's `algorithm.micro_batch_size`); `rollout_func` is TRL's
    custom (multi-turn) rollout, e.g. `argym.agents.trl_rollout.ServedRollout`."""
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        report_to=[],
        per_device_train_batch_size=micro_batch or prompts * group,
        num_generations=group,
        # TRL generates steps_per_generation (= the accumulation) micro-batches at once: one generation a step
        gradient_accumulation_steps=(prompts * group) // micro_batch if micro_batch else 1,
        max_completion_length=new_tokens,
        beta=0.0,
        loss_type="grpo",
        lr_scheduler_type="constant",
        warmup_steps=0,
        save_strategy="no",
        seed=seed,
        shuffle_dataset=False,
        dataloader_num_workers=0,
        **config,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[callback],
        rollout_func=rollout_func,
    )
