"""The policy's forward on one micro-batch: each target token's log-prob (and entropy) at temperature T.

Both π_old and the training forward go through `token_logprobs`, on the same
micro-batches, so they take the same numerical path (in bf16 they match to the bit).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from argym.algorithms.batch import TrainBatch
from argym.algorithms.prefix import place, plan_shared_prefix, shared_prefix_logits


def token_logprobs(
    model: nn.Module,
    mb: TrainBatch,
    temperature: float,
    share_prefix: bool,
    entropy: bool = False,
    entropy_grad: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Log-prob of each target token and (if asked) the policy's entropy there, (b, l-1).

    With `share_prefix` each group's prompt runs once and its key/value cache
    serves the group's samples (algorithms/prefix.py); the result is the same.
    """
    plan = plan_shared_prefix(mb) if share_prefix else None
    if plan is None:
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask, use_cache=False).logits[
            :, :-1
        ]  # (b, l-1, V): position t predicts t+1
        return logp_entropy(logits, mb.input_ids[:, 1:], temperature, entropy, entropy_grad)
    logits, targets, columns, valid = shared_prefix_logits(model, mb, plan)  # (b, s, V)
    logp, h = logp_entropy(logits, targets, temperature, entropy, entropy_grad)
    width = mb.input_ids.shape[1] - 1
    return place(logp, columns, valid, width), (place(h, columns, valid, width) if h is not None else None)


def logp_entropy(
    logits: Tensor, targets: Tensor, temperature: float, entropy: bool, entropy_grad: bool
) -> tuple[Tensor, Tensor | None]:
    """log π(y_t) = z_{y_t}/T − logsumexp(z/T), in float32, and the entropy
    H = logsumexp(z/T) − Σ softmax(z/T)·z/T from the same logits, without grad
    unless `entropy_grad` (an entropy bonus is being trained)."""
    logits = logits.float() / temperature
    log_z = torch.logsumexp(logits, dim=-1)  # (b, l)
    logp = logits.gather(-1, targets[..., None]).squeeze(-1) - log_z  # (b, l)
    if not entropy:
        return logp, None
    z, lz = (logits, log_z) if entropy_grad else (logits.detach(), log_z.detach())
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        h = lz - (torch.softmax(z, dim=-1) * z).sum(dim=-1)  # (b, l)
    return logp, h


def can_share_prefix(model: nn.Module) -> bool:
    """Whether `model` (unwrapped) keeps a key/value cache to share: gradient checkpointing recomputes
    activations and keeps none."""
    name = (
        "is_activation_checkpointing"
        if hasattr(type(model), "is_activation_checkpointing")
        else "is_gradient_checkpointing"
    )  # renamed in transformers 5.24
    return not getattr(model, name, False)


def disable_dropout(model: nn.Module) -> None:
    """Switch every dropout in `model` off: `nn.Dropout` modules (LoRA's `lora_dropout` too) and
    the attention dropout transformers' attention modules read from a float attribute in train mode.

    RL needs π_θ = π_old at equal weights (the ratio is 1 on-policy), so the policy
    and the critic train without dropout, as verl and OpenRLHF do (they set the
    model config's dropouts to 0); here the modules are changed, not the saved config.
    """
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        for name in ("attention_dropout", "dropout"):
            if isinstance(getattr(module, name, None), float):
                setattr(module, name, 0.0)
