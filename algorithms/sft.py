"""Supervised warm start on oracle trajectories.

For any env with an oracle: roll the oracle out on training tasks, render the
conversations with the policy's own template (exactly as a rollout would lay
them out), and fine-tune on the policy-token positions only. A small model
then emits well-formed answers (and tool calls) before RL starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from argym.agents.renderer import conversation_ids
from argym.agents.rollout import RolloutEngine
from argym.agents.scripted import OracleAgent
from argym.algorithms.interrupts import deferred_stop


def oracle_sequences(
    env_id: str, env_kwargs: dict[str, Any], renderer: Any, n_tasks: int, seed: int, executors: Any = None
) -> list[tuple[list[int], list[int]]]:
    """Ids and loss masks of `n_tasks` oracle episodes on the train split."""
    with RolloutEngine(
        env_id, {**env_kwargs, "split": "train"}, OracleAgent(), executors=executors
    ) as engine:
        rng = np.random.default_rng(seed)
        tasks = [engine.task_source.sample(rng, "train") for _ in range(n_tasks)]
        trajs = engine.run(tasks, seed=seed)
    return [
        conversation_ids(renderer, t.messages, tools=t_task.tools)
        for t, t_task in zip(trajs, tasks)
        if not t.infra_failure
    ]


def masked_nll(model: Any, ids: torch.Tensor, attn: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token NLL over positions where `mask` (aligned to targets) is 1."""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()  # (B, L-1, V)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # (B, L-1)
    target_mask = mask[:, 1:].float()
    return (nll * target_mask).sum() / target_mask.sum().clamp(min=1)


def pad_right(seqs: list[list[int]], pad: int) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def warm_start(
    policy: Any,
    sequences: list[tuple[list[int], list[int]]],
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    accelerator: Any = None,
    log: Any = None,
    resume: dict[str, Any] | None = None,
    save: Callable[[dict[str, Any]], object] | None = None,
    save_every: int = 0,
) -> list[float]:
    """Fine-tune `policy.model` on the masked sequences; returns the loss per step.

    `save(state)` receives the warm start's state (step, optimizer, RNGs, losses) every `save_every`
    steps and when a Ctrl-C or SIGTERM stops it (after the step in progress, `interrupts.deferred_stop`,
    which then re-raises the stop); `resume` is such a state, and the run continues from it as the
    uninterrupted one would have."""
    model = policy.model
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    if accelerator is not None:
        model, optimizer = accelerator.prepare(model, optimizer)
    rng = np.random.default_rng(seed)
    losses: list[float] = []
    if resume is not None:
        optimizer.load_state_dict(resume["optimizer"])
        rng.bit_generator.state = resume["rng"]
        torch.set_rng_state(resume["torch_rng"])
        losses = [float(x) for x in resume["losses"]]

    def state() -> dict[str, Any]:
        return {
            "step": len(losses),
            "optimizer": optimizer.state_dict(),
            "rng": rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "losses": list(losses),
        }

    model.train()
    with deferred_stop() as stop:
        for step in range(len(losses), steps):
            pick = rng.choice(len(sequences), size=min(batch_size, len(sequences)), replace=False)
            ids = pad_right([sequences[i][0] for i in pick], policy.pad_id)
            mask = pad_right([sequences[i][1] for i in pick], 0)
            attn = pad_right([[1] * len(sequences[i][0]) for i in pick], 0)
            device = next(model.parameters()).device
            loss = masked_nll(model, ids.to(device), attn.to(device), mask.to(device))
            optimizer.zero_grad(set_to_none=True)
            if accelerator is not None:
                accelerator.backward(loss)
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            if log is not None:
                log(step, losses[-1])
            # the last step too: building the learner after it takes a while, and a stop then keeps the warm start
            due = (save_every > 0 and (step + 1) % save_every == 0) or step + 1 == steps
            if save is not None and (due or stop.requested):
                model.eval()
                save(state())
                model.train()
            stop.raise_stop()
    model.eval()
    return losses
