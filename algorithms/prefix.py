"""One forward pass of a group's shared prompt, reused by every sample of the group.

The G samples of a GRPO group share their prompt token for token, and in the
update most of each sequence is that prompt (two-digit addition: ~75 prompt
tokens, ~15 response tokens). Running the prompt once per group and expanding
its key/value cache to the group's rows gives the same log-probs and the same
gradients (autograd sums the rows' contributions through the expansion) for
a fraction of the tokens: B·L tokens become U·P + B·(L − P), U the number of
groups. Rows whose prompt differs within a group, or a model without a
key/value cache, take the ordinary full forward.

Only columns from the last prompt token on (the targets that are response or
env tokens) are computed; earlier, prompt-only columns come back as 0 — the
learner never reads them (every per-token term is masked by `loss_mask`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from argym.algorithms.batch import TrainBatch


@dataclass
class PrefixPlan:
    """How the rows of a micro-batch split into shared prompts and per-row suffixes."""

    prompt_len: Tensor  # (B,) tokens before the first policy token (same within a group)
    row_group: Tensor  # (B,) index of the row's prompt among the U shared prompts
    leaders: Tensor  # (U,) one row per shared prompt


def plan_shared_prefix(mb: TrainBatch) -> PrefixPlan | None:
    """The sharing plan, or None where it would not help or does not apply.

    Applies when every row has a policy token, rows of one group have the same
    prompt (same length, same ids), and there are fewer distinct prompts than rows.
    """
    has_policy = mb.loss_mask.sum(-1) > 0  # (B,)
    if not bool(has_policy.all()):
        return None
    prompt_len = mb.loss_mask.argmax(-1) + 1  # first policy target column c ↔ token c + 1
    groups, row_group = torch.unique(mb.group_ids, return_inverse=True)
    if len(groups) == len(mb):
        return None
    leaders = torch.zeros(len(groups), dtype=torch.long, device=row_group.device)
    leaders.scatter_(0, row_group, torch.arange(len(mb), device=row_group.device))  # any row of each group
    lead = leaders[row_group]  # (B,) the group's leader row
    if not bool((prompt_len == prompt_len[lead]).all()):
        return None
    cols = torch.arange(mb.input_ids.shape[1], device=mb.input_ids.device)
    in_prompt = cols[None, :] < prompt_len[:, None]  # (B, L)
    if not bool(((mb.input_ids == mb.input_ids[lead]) | ~in_prompt).all()):
        return None
    return PrefixPlan(prompt_len=prompt_len, row_group=row_group, leaders=leaders)


def shared_prefix_logits(
    model: nn.Module, mb: TrainBatch, plan: PrefixPlan
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Logits of the positions from each row's last prompt token on.

    Returns `logits` (B, S, V) where index j is position P_r − 1 + j, its
    `targets` (B, S), the target-aligned `columns` (B, S) they belong to, and
    `valid` (B, S), False past the row's end.
    """
    ids, mask = mb.input_ids, mb.attention_mask
    B, L = ids.shape
    dev = ids.device
    P = plan.prompt_len  # (B,)
    lead_P = P[plan.leaders]  # (U,)
    Pmax = int(lead_P.max())
    # the U prompts, left-padded so each ends at column Pmax − 1
    shift = Pmax - lead_P  # (U,)
    j = torch.arange(Pmax, device=dev)
    src = (j[None, :] - shift[:, None]).clamp(min=0)  # (U, Pmax)
    real = j[None, :] >= shift[:, None]
    pre_ids = torch.where(real, ids[plan.leaders].gather(1, src), torch.zeros_like(src))
    pre_mask = real.long()
    pre_pos = (j[None, :] - shift[:, None]).clamp(min=0)
    out = model(input_ids=pre_ids, attention_mask=pre_mask, position_ids=pre_pos, use_cache=True)
    last = out.logits[:, -1]  # (U, V): predicts each row's first policy token
    cache = out.past_key_values
    cache.reorder_cache(plan.row_group)  # (U, ...) → (B, ...), differentiable index_select
    # each row's suffix, right-padded
    lengths = mask.sum(-1)  # (B,)
    S = int((lengths - P).max())
    k = torch.arange(S, device=dev)
    suf_src = (P[:, None] + k[None, :]).clamp(max=L - 1)  # (B, S)
    suf_real = (P[:, None] + k[None, :]) < lengths[:, None]
    suf_ids = torch.where(suf_real, ids.gather(1, suf_src), torch.zeros_like(suf_src))
    full_mask = torch.cat([pre_mask[plan.row_group], suf_real.long()], dim=1)  # (B, Pmax + S)
    suf_out = model(
        input_ids=suf_ids,
        attention_mask=full_mask,
        position_ids=P[:, None] + k[None, :],
        use_cache=True,
        **{_cache_kwarg(model): cache},
    )
    logits = torch.cat([last[plan.row_group][:, None], suf_out.logits[:, :-1]], dim=1)  # (B, S, V)
    columns = P[:, None] - 1 + k[None, :]  # (B, S)
    return logits, suf_ids, columns, suf_real


def _cache_kwarg(model: nn.Module) -> str:
    """transformers 5.24 renamed `past_key_values` to `cache` in model forwards (the old name warns)."""
    inner = getattr(model, "module", model)  # DDP
    get_base_model = getattr(inner, "get_base_model", None)  # peft
    if get_base_model is not None:
        inner = get_base_model()
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def place(values: Tensor, columns: Tensor, valid: Tensor, width: int) -> Tensor:
    """Scatter (B, S) values into a (B, width) target-aligned tensor, 0 elsewhere (differentiable)."""
    B = values.shape[0]
    idx = torch.where(valid, columns, torch.full_like(columns, width))  # invalid → a spill column
    out = torch.zeros(B, width + 1, dtype=values.dtype, device=values.device)
    return out.scatter(1, idx, values * valid)[:, :width]
