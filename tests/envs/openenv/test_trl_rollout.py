"""TRL's `GRPOTrainer` through `argym serve`: one GRPO step of the tiny model on served ToolCall episodes.

Here beside the served-env tests, whose `serve` fixture it uses (the adapter itself is `argym.agents.trl_rollout`).
The rollout runs over real OpenEnv sessions (openenv-core's client and server), real tools and TRL's real
trainer (pinned, the `trl` extra); nothing is stubbed.
"""

from __future__ import annotations

import pytest
import torch

from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.agents.trl_rollout import ServedRollout, env_reward
from argym.errors import ConfigError

TOOLCALL = {
    "tasks": "executable(test_size=20,kinds=anniversary_weekday)",
    "max_turns": 2,
    "format_weight": 0.1,
}


def _trainer(url: str, rollout: ServedRollout, tmp_path, steps: int = 1):
    from trl import GRPOConfig, GRPOTrainer

    tok = build_tiny_tokenizer()
    model = build_tiny_model(
        tok,
        TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64, max_positions=4096),
        seed=0,
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        report_to=[],
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=rollout.max_total_tokens,
        max_steps=steps,
        learning_rate=1e-3,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        shuffle_dataset=False,
        dataloader_num_workers=0,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=env_reward,
        args=args,
        train_dataset=rollout.dataset(range(4)),
        processing_class=tok,
        rollout_func=rollout,
    )


@pytest.mark.slow
def test_one_trl_step_on_served_toolcall_episodes(serve, tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    with serve("argym/ToolCall-v0", env_kwargs=TOOLCALL) as (url, _):
        rollout = ServedRollout(url, max_new_tokens=12, max_total_tokens=3000)
        trainer = _trainer(url, rollout, tmp_path)
        seen: list[dict] = []
        inner = rollout.__call__

        def recording(prompts, tr):  # keeps what the rollout handed TRL, to check its layout
            out = inner(prompts, tr)
            seen.append(out)
            return out

        trainer.rollout_func = recording
        trainer.train()
        prompt = trainer.train_dataset[0]["prompt"]
        short = ServedRollout(url, max_new_tokens=8, max_total_tokens=50)
        short.task_ids = rollout.task_ids
        with pytest.raises(ConfigError, match="leaves no room under max_total_tokens=50"):
            short([prompt], trainer)  # a clear error, not a negative token budget
    assert trainer.state.global_step == 1
    out = seen[0]
    assert len(out["completion_ids"]) == 4  # 2 tasks x 2 samples: one completion per prompt TRL passed
    renderer = rollout._policy.renderer
    for ids, mask, lps, ep in zip(out["completion_ids"], out["env_mask"], out["logprobs"], rollout.episodes):
        assert len(ids) == len(mask) == len(lps)
        assert 1 <= ep["turns"] <= TOOLCALL["max_turns"]
        # the policy's tokens (mask 1), turn by turn, are exactly the assistant turns the served env recorded
        turns, cur = [], []
        for i, m in zip(ids, mask):
            if m:
                cur.append(i)
            elif cur:
                turns.append(cur)
                cur = []
        turns += [cur] if cur else []
        sent = [m["content"] for m in ep["messages"] if m["role"] == "assistant"]
        assert len(turns) == len(sent) == ep["turns"]
        for t, text in zip(turns, sent):  # sent as generated: the end-of-turn token off, nothing else
            assert renderer.decode(t[:-1] if t[-1] == renderer.eos_id else t) == text
        assert all(lp <= 0.0 for lp, m in zip(lps, mask) if m)  # the sampler's log-probs, 0 on env tokens
    # the env's grade is TRL's reward: format 0.1 per readable turn, outcome 1 on success
    assert out["env_reward"] == [ep["reward"] for ep in rollout.episodes]
    assert all(r >= 0.0 for r in out["env_reward"])


def test_budgets_are_checked():
    with pytest.raises(ConfigError, match="max_new_tokens < max_total_tokens"):
        ServedRollout("http://127.0.0.1:1", max_new_tokens=64, max_total_tokens=64)
