"""Self-Aligned Reward (SAR, arXiv 2509.05489): how much the question makes the answer more likely.

R_SA = clip((ppl(a) − ppl(a|q)) / ppl(a), −1, 1), with ppl the policy's own
perplexity of the answer tokens, alone and after the question
(`compute_ppl_qa_log` in the authors' verl code: `use_denominator=True`,
`use_log=False`). It is added to the verifiable reward with weight α = 0.2.
An answer that only makes sense given the question scores high; a generic
or padded answer, as likely without the question, scores near 0.

Here a is the policy tokens of the last assistant turn, q everything before
it; "alone" means after an empty user message rendered by the same chat
template (the caller passes those prompt ids). Simplification: in a
multi-turn episode earlier turns count as part of the question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from argym.types import Trajectory


def self_aligned_reward(logp_answer: Sequence[float], logp_answer_given_q: Sequence[float]) -> float:
    """R_SA from per-token log-probs of the answer without and with the question (arXiv 2509.05489 eq. 3)."""
    if not logp_answer or len(logp_answer) != len(logp_answer_given_q):
        raise ValueError(
            f"need the same non-zero number of answer log-probs with and without the question, got "
            f"{len(logp_answer)} and {len(logp_answer_given_q)}."
        )
    ppl_a = math.exp(-sum(logp_answer) / len(logp_answer))
    ppl_aq = math.exp(-sum(logp_answer_given_q) / len(logp_answer_given_q))
    return max(-1.0, min(1.0, (ppl_a - ppl_aq) / ppl_a))


def last_turn_split(traj: Trajectory) -> tuple[list[int], list[int]]:
    """(context ids, answer ids): the last assistant turn's policy tokens and everything before them."""
    if not traj.token_ids or not traj.turn_ends:
        raise ValueError(
            f"trajectory {traj.task_id!r} has no token ids; SAR needs the policy's exact tokens."
        )
    end = traj.turn_ends[-1]
    start = end
    while start > 0 and traj.loss_mask[start - 1]:
        start -= 1
    return list(traj.token_ids[:start]), list(traj.token_ids[start : end + 1])


def continuation_logprobs(
    model: Any,
    contexts: Sequence[Sequence[int]],
    answers: Sequence[Sequence[int]],
    pad_id: int,
    batch_size: int = 8,
) -> list[list[float]]:
    """log π(answer tokens | context) for each pair, no grad, right-padded batches; one list per pair."""
    import torch

    device = next(model.parameters()).device
    was = model.training
    model.eval()
    out: list[list[float]] = []
    with torch.no_grad():
        for i in range(0, len(answers), batch_size):
            rows = [
                list(c) + list(a) for c, a in zip(contexts[i : i + batch_size], answers[i : i + batch_size])
            ]
            width = max(len(r) for r in rows)
            ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (b, L)
            mask = torch.zeros_like(ids)
            for k, r in enumerate(rows):
                ids[k, : len(r)] = torch.tensor(r)
                mask[k, : len(r)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits[:, :-1].float()
            # (b, L-1, V): position t predicts t+1; log-softmax at the targets only, no second (b, L-1, V) tensor
            target = logits.gather(-1, ids[:, 1:, None].to(device)).squeeze(-1)  # (b, L-1)
            tok = (target - torch.logsumexp(logits, dim=-1)).cpu()  # (b, L-1)
            for k, (c, a) in enumerate(zip(contexts[i : i + batch_size], answers[i : i + batch_size])):
                out.append(tok[k, len(c) - 1 : len(c) - 1 + len(a)].tolist())
    model.train(was)
    return out


def sar_rewards(
    model: Any, trajectories: Sequence[Trajectory], empty_prompt_ids: Sequence[int], pad_id: int
) -> list[float]:
    """R_SA of each trajectory's last turn under `model` at temperature 1 (two no-grad forward passes per batch)."""
    pairs = [last_turn_split(t) for t in trajectories]
    answers = [a for _, a in pairs]
    given_q = continuation_logprobs(model, [c for c, _ in pairs], answers, pad_id)
    alone = continuation_logprobs(model, [list(empty_prompt_ids)] * len(answers), answers, pad_id)
    return [self_aligned_reward(a, q) for a, q in zip(alone, given_q)]
