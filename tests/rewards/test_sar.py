"""Self-Aligned Reward (arXiv 2509.05489) by hand, and the policy log-probs it is computed from."""

from __future__ import annotations

import math

import pytest
import torch

from argym.agents.renderer import ChatRenderer, conversation_ids
from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.rewards.sar import continuation_logprobs, last_turn_split, sar_rewards, self_aligned_reward
from argym.types import Trajectory


def test_sar_by_hand_and_clipped():
    # ppl(a) = e^2, ppl(a|q) = e: the question makes the answer more likely
    assert self_aligned_reward([-2.0, -2.0], [-1.0, -1.0]) == pytest.approx(1 - 1 / math.e)
    assert self_aligned_reward([-1.0], [-1.0]) == 0.0  # as likely without the question
    assert self_aligned_reward([-1.0], [-3.0]) == -1.0  # (e - e^3) / e < -1: clipped
    with pytest.raises(ValueError):
        self_aligned_reward([], [])


@pytest.fixture(scope="module")
def tiny():
    tok = build_tiny_tokenizer()
    return tok, build_tiny_model(
        tok, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    )


def test_answer_logprobs_do_not_depend_on_batching(tiny):
    tok, model = tiny
    contexts, answers = [[5, 6, 7, 8, 9, 10], [11, 12]], [[20, 21, 22], [23]]
    together = continuation_logprobs(model, contexts, answers, pad_id=tok.pad_token_id)
    alone = [
        continuation_logprobs(model, [c], [a], pad_id=tok.pad_token_id)[0] for c, a in zip(contexts, answers)
    ]
    for x, y in zip(together, alone):
        assert x == pytest.approx(y, abs=1e-5)
    ids = torch.tensor([contexts[0] + answers[0]])
    logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1)  # position t predicts t + 1
    direct = [logp[5 + k, answers[0][k]].item() for k in range(3)]
    assert together[0] == pytest.approx(direct, abs=1e-5)


def test_sar_scores_the_last_turn(tiny):
    tok, model = tiny
    r = ChatRenderer(tok)
    messages = [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "\\boxed{5}"},
        {"role": "user", "content": "Incorrect."},
        {"role": "assistant", "content": "\\boxed{4}"},
    ]
    ids, mask = conversation_ids(r, messages)
    ends = [p for p in range(len(mask)) if mask[p] and (p + 1 == len(mask) or not mask[p + 1])]
    t = Trajectory(
        task_id="t",
        messages=messages,
        reward=1.0,
        success=True,
        turns=2,
        terminated=True,
        truncated=False,
        token_ids=ids,
        loss_mask=mask,
        turn_rewards=[0.0, 1.0],
        turn_ends=ends,
    )
    context, answer = last_turn_split(t)
    assert r.decode(answer) == "\\boxed{4}<|im_end|>" and context == ids[: len(context)]
    (value,) = sar_rewards(model, [t], r.prompt_ids([{"role": "user", "content": ""}]), tok.pad_token_id)
    assert -1.0 <= value <= 1.0 and value != 0.0
    with pytest.raises(ValueError, match="token ids"):
        last_turn_split(
            Trajectory(
                task_id="m",
                messages=messages,
                reward=0,
                success=False,
                turns=2,
                terminated=True,
                truncated=False,
            )
        )
