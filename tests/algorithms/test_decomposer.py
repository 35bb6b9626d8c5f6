"""Decomposer-Reasoner utility mode (A²D): hint utility as the decomposer's reward, distilled hinted successes."""

from __future__ import annotations

import numpy as np
import pytest

from argym.agents.hf import HFPolicy
from argym.agents.policy import Completion, SamplingParams
from argym.agents.rollout import RolloutEngine
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.algorithms.decomposer import (
    HINT_HEADER,
    DecomposerConfig,
    UtilityDecomposer,
    decomposer_messages,
    with_hints,
)
from argym.errors import ConfigError

from ..tiny_run import TINY_POLICY

ENV = ("argym/Math-v0", {"tasks": "arithmetic(digits=1,ops=+,terms=2)"})


class HintAwareOracle:
    """A token policy for tests: answers right only when the context holds hints, and writes hints when asked.

    It wraps the tiny tokenizer and returns exact ids, so the engine's token bookkeeping runs for real.
    """

    def __init__(self, tokenizer, always_right: bool = False):
        self.tokenizer, self.always_right = tokenizer, always_right
        from argym.agents.renderer import ChatRenderer

        self.renderer = ChatRenderer(tokenizer)

    def generate(self, prompts, sampling, seed=None):
        out = []
        for p in prompts:
            text = self.tokenizer.decode(p)
            if "sub-questions that solve it" in text:
                reply = "a + b"
            else:
                question = text.split("What is ")[1].split("?")[0]
                a, b = (int(x) for x in question.split(" + "))
                reply = f"\\boxed{{{a + b if HINT_HEADER in text or self.always_right else a + b + 1}}}"
            ids = self.renderer.encode(reply) + [self.renderer.eos_id]
            out.append(
                Completion(token_ids=ids, logprobs=[-0.1] * len(ids), finish_reason="stop", text=reply)
            )
        return out


def test_hint_utility_is_the_decomposer_reward_and_hinted_successes_are_distilled():
    tok = build_tiny_tokenizer()
    agent = HintAwareOracle(tok)
    with RolloutEngine(*ENV, agent, SamplingParams(max_new_tokens=12)) as engine:
        tasks = [engine.task_source.sample(np.random.default_rng(1), "train") for _ in range(2)]
        strategy = UtilityDecomposer(engine, DecomposerConfig(hint_sets=2, hint_samples=3), agent)
        trajs, metrics = strategy.run(tasks, group_size=2, seed=0)
    reasoner = [t for t in trajs if t.group < 2]
    decomposer = [t for t in trajs if t.group >= 2]
    # the reasoner fails without hints (2 per task) and succeeds with them: 2 hint sets × 3 distilled per task
    assert sum(not t.success for t in reasoner) == 4 and sum(t.success for t in reasoner) == 12
    assert len(decomposer) == 4 and all(t.reward == 1.0 for t in decomposer)  # utility 1 − 0
    assert metrics["decomposer/utility_mean"] == 1.0 and metrics["decomposer/distilled"] == 12.0
    hint_ids = agent.renderer.encode(HINT_HEADER)
    for t in reasoner:  # hints never in the reasoner's training context
        assert HINT_HEADER not in tok.decode(t.token_ids)
        assert all(t.token_ids[i : i + len(hint_ids)] != hint_ids for i in range(len(t.token_ids)))
    plain_prompt = agent.renderer.prompt_ids([dict(m) for m in tasks[0].prompt])
    distilled = [t for t in reasoner if t.group == 0 and t.success]
    assert all(t.token_ids[: len(plain_prompt)] == plain_prompt for t in distilled)
    assert all(sum(t.loss_mask[: len(plain_prompt)]) == 0 and sum(t.loss_mask) > 0 for t in distilled)
    for t in decomposer:
        assert (
            "sub-questions that solve it" in tok.decode(t.token_ids)
            and tok.decode([i for i, m in zip(t.token_ids, t.loss_mask) if m]) == "a + b<|im_end|>"
        )


def test_adaptive_trigger_skips_tasks_already_solved():
    agent = HintAwareOracle(build_tiny_tokenizer(), always_right=True)
    with RolloutEngine(*ENV, agent, SamplingParams(max_new_tokens=12)) as engine:
        tasks = [engine.task_source.sample(np.random.default_rng(2), "train") for _ in range(2)]
        trajs, metrics = UtilityDecomposer(engine, DecomposerConfig(), agent).run(tasks, group_size=2)
    assert metrics["decomposer/triggered"] == 0.0 and len(trajs) == 4 and all(t.success for t in trajs)


def test_role_prompts_and_config_checks():
    tok = build_tiny_tokenizer()
    policy = HFPolicy(
        build_tiny_model(
            tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
        ),
        tok,
    )
    with RolloutEngine(*ENV, policy) as engine:
        task = engine.task_source.sample(np.random.default_rng(0), "train")
    assert decomposer_messages(task)[-1]["content"].startswith("Do not solve it")
    hinted = with_hints(task, "a + b\n")
    assert (
        hinted.prompt[-1] == {"role": "user", "content": f"{HINT_HEADER}\na + b"}
        and hinted.answer == task.answer
    )
    with pytest.raises(ConfigError, match="hint_samples"):
        DecomposerConfig(hint_samples=0)


SMALL = [
    *TINY_POLICY,
    "warm_start.tasks=8",
    "warm_start.batch_size=4",
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=6",
    "eval.episodes=4",
    "eval.every=0",
    "algorithm.micro_batch_size=8",
    "steps=1",
    "checkpoint_every=1",
]


@pytest.mark.parametrize("recipe", ["decomposer_verified.yaml", "decomposer_utility.yaml"])
def test_both_modes_train_from_their_configs(recipe, tmp_path):
    from pathlib import Path

    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    cfg = load_config(
        Path(__file__).resolve().parents[2] / "configs" / recipe, SMALL + [f"out_dir={tmp_path}"]
    )
    trainer = Trainer(cfg)
    try:
        metrics = trainer.train_step()
        result = trainer.evaluate(4)
    finally:
        trainer.close()
    # the batch reached the learner; it steps exactly when some group's rewards differ (a flat batch has
    # no gradient and takes no AdamW step)
    assert metrics["train/trajectories"] >= 2 * 2 and "train/loss" in metrics and 0 <= result.mean <= 1
    assert metrics["train/optimizer_steps"] == float(metrics["train/group_reward_std"] > 0)
    if recipe == "decomposer_utility.yaml":
        assert "decomposer/triggered" in metrics
    else:  # the warm start came from the wrapper's oracle: a decomposition turn, then the sub-answers
        assert cfg.env.id == "argym/DecomposeReasoner-v0" and metrics["train/turns"] >= 2
