"""GRPO in one file: the tiny policy trained on two-digit addition (`argym/Math-v0`).

    python examples/grpo_minimal.py                  # the quickstart's settings (`argym quickstart`)
    python examples/grpo_minimal.py --steps 2 --warm-start-steps 0 --tasks-per-step 2  # a smoke run

The loop has the shape of CleanRL's `ppo.py`: seed → env and policy → for each
step: roll out groups → group-normalised advantages (GRPO, arXiv 2402.03300
eq. 3, the outcome-supervision case) → epochs of a clipped surrogate loss
(PPO, arXiv 1707.06347 eq. 7) → AdamW step → one metrics line. The advantage
and the loss are argym's registered parts, the ones `argym train` composes;
everything else is written out here. Simplified: one process, no KL penalty,
one mini-batch per epoch, single-turn episodes.
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from dataclasses import dataclass

import numpy as np
import torch

import argym
from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.renderer import ChatRenderer
from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
from argym.algorithms.advantages import AdvantageInputs
from argym.algorithms.learner_config import LearnerConfig
from argym.algorithms.losses import aggregate
from argym.algorithms.registry import ADVANTAGES, POLICY_LOSSES
from argym.algorithms.sft import oracle_sequences, warm_start
from argym.seeding import seed_for


@dataclass
class Args:
    seed: int = 0
    """Seeds the model, the task draws and the sampling."""
    env_id: str = "argym/Math-v0"
    """The env to train on (single-turn: one answer per episode)."""
    tasks: str = "arithmetic(digits=2,ops=+,terms=2)"
    """The env's task source."""
    warm_start_steps: int = 400
    """Supervised steps on oracle answers first, so some samples are right and GRPO has a signal."""
    warm_start_tasks: int = 2000
    """Oracle answers the warm start trains on."""
    steps: int = 100
    """RL steps: rollout, advantages, update."""
    tasks_per_step: int = 32
    """Distinct tasks per step."""
    group_size: int = 8
    """Samples per task (GRPO's G); the advantage compares a sample with its group."""
    max_new_tokens: int = 16
    """Most tokens per answer."""
    temperature: float = 1.0
    """Sampling temperature; the loss computes log-probs at the same one."""
    lr: float = 2e-4
    """AdamW learning rate (the tiny model takes a far larger one than an LLM's 1e-6)."""
    ppo_epochs: int = 1
    """Passes over each step's rollouts; more than 1 makes the ratio and its clip matter."""
    clip: float = 0.2
    """ε of the clipped ratio."""


def parse_args() -> Args:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for f in dataclasses.fields(Args):
        parser.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    return Args(**vars(parser.parse_args()))


def token_logprobs(model: torch.nn.Module, ids: torch.Tensor, attn: torch.Tensor, t: float) -> torch.Tensor:
    """log π(token | prefix) at temperature t for every target position, (B, L-1)."""
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / t  # (B, L-1, V)
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, L-1)


def main(args: Args) -> None:
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    env = argym.make(args.env_id, tasks=args.tasks, split="train")
    tokenizer = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tokenizer, seed=args.seed), tokenizer, name="tiny")
    renderer = ChatRenderer(tokenizer)
    if args.warm_start_steps > 0:
        oracle = oracle_sequences(
            args.env_id, {"tasks": args.tasks}, renderer, args.warm_start_tasks, args.seed + 1
        )
        warm_start(policy, oracle, args.warm_start_steps, batch_size=64, lr=2e-3, seed=args.seed + 2)
    # the learner's parts by name, as a recipe names them; the config carries their settings
    cfg = LearnerConfig(lr=args.lr, clip_low=args.clip, clip_high=args.clip, temperature=args.temperature)
    advantage_fn, loss_fn = ADVANTAGES.get("grpo"), POLICY_LOSSES.get("ppo_clip")
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=args.lr, weight_decay=0.0)
    sampling = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)

    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        # 1. rollout: G samples of each task, each graded by the env
        tasks, prompts = [], []
        for _ in range(args.tasks_per_step):
            obs, _ = env.reset(seed=int(np.random.randint(2**31)))  # a new training task
            tasks.append(env.unwrapped.task)
            prompts.append(renderer.prompt_ids(obs))
        policy.model.eval()
        completions = policy.generate(
            [p for p in prompts for _ in range(args.group_size)], sampling, seed=seed_for(args.seed, step)
        )
        rewards, groups, sequences = [], [], []
        for i, c in enumerate(completions):
            task = i // args.group_size
            env.reset(options={"task": tasks[task]})
            _, reward, *_ = env.step(c.text)
            rewards.append(float(reward))
            groups.append(task)
            sequences.append((prompts[task] + c.token_ids, len(prompts[task])))

        # 2. the batch, right-padded: ids (B, L), attention (B, L), policy-token mask (B, L-1)
        width = max(len(ids) for ids, _ in sequences)
        ids = torch.full((len(sequences), width), policy.pad_id, dtype=torch.long)
        attn = torch.zeros((len(sequences), width), dtype=torch.long)
        mask = torch.zeros((len(sequences), width - 1))
        for row, (seq, n_prompt) in enumerate(sequences):
            ids[row, : len(seq)], attn[row, : len(seq)] = torch.tensor(seq), 1
            mask[row, n_prompt - 1 : len(seq) - 1] = 1.0  # target t+1 is a completion token

        # 3. advantages: each reward against its group's mean and std, broadcast to the tokens
        rewards_t, groups_t = torch.tensor(rewards), torch.tensor(groups)
        adv = advantage_fn(AdvantageInputs(rewards_t, groups_t), cfg)[:, None] * mask  # (B, L-1)

        # 4. π_old: the policy before this step's updates (no grad; the model has no dropout)
        policy.model.train()
        with torch.no_grad():
            old_logp = token_logprobs(policy.model, ids, attn, args.temperature)  # (B, L-1)

        # 5. epochs of the clipped surrogate, one optimizer step each
        for _ in range(args.ppo_epochs):
            logp = token_logprobs(policy.model, ids, attn, args.temperature)  # (B, L-1)
            per_token, clipped = loss_fn(logp, old_logp, adv, mask, cfg)  # (B, L-1) each
            # GRPO's seq-mean-token-mean: each answer's mean token loss, averaged over the answers
            loss = aggregate(per_token, mask, cfg.loss_agg, mask.sum().item(), float(len(mask)))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
            optimizer.step()

        # 6. log
        n_tokens = max(mask.sum().item(), 1.0)
        print(
            json.dumps(
                {
                    "step": step,
                    "train/reward": round(rewards_t.mean().item(), 4),
                    "train/loss": round(loss.item(), 6),
                    "train/clip_frac": round(((clipped.float() * mask).sum() / n_tokens).item(), 4),
                    "train/grad_norm": round(grad_norm.item(), 4),
                    "train/response_tokens": round(n_tokens / len(mask), 2),
                    "perf/seconds": round(time.perf_counter() - t0, 2),
                }
            ),
            flush=True,
        )
    env.close()


if __name__ == "__main__":
    main(parse_args())
