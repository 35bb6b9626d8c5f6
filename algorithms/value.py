"""VAPO's critic: a value model on the policy's architecture, its loss and its pretraining.

VAPO (arXiv 2504.05118) is PPO with a learned value: GAE with λ_critic = 1 for
the value targets (the Monte-Carlo returns) and a length-adaptive λ_policy for
the actor (`argym.algorithms.advantages.gae`, `length_adaptive_lambda`). Its
ablation shows the value model must be pretrained on returns of the initial
policy before policy updates (§3.1: 60 → 11 on AIME24 without), and that it
takes its own learning rate (critic 2e-6, actor 1e-6): here `value_lr_scale`
(2) times the actor's, so a recipe's lr moves both.

- `ValueModel`: a copy of the policy's transformer body (separate weights) with a
  scalar head; V(s_t) is read at position t, so values are target-aligned like
  every per-token field of `TrainBatch` (column t: the state before token t + 1).
- `value_loss`: PPO's clipped value loss, 0.5·max((V − R)², (V_old + clip(V − V_old, ±ε) − R)²)
  (verl `compute_value_loss`), token-mean over the global batch.
- `Critic`: the value model, its AdamW and an accelerate-prepared update.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from argym.algorithms.batch import TrainBatch, split_batch, stack_rows
from argym.algorithms.forward import disable_dropout

if TYPE_CHECKING:
    from accelerate import Accelerator
    from transformers import PreTrainedModel

    from argym.algorithms.learner_config import LearnerConfig


class ValueModel(nn.Module):
    """V(s_t) from a transformer body with a linear head; `forward` gives (B, L) values."""

    def __init__(self, body: nn.Module, hidden_size: int):
        super().__init__()
        self.body = body
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)  # start at V ≡ 0 (+ bias), so pretraining does the fitting
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_policy(cls, policy_model: nn.Module) -> ValueModel:
        """A value model with the policy's architecture and a copy of its weights (then trained apart).

        Takes the body of a transformers `*ForCausalLM` (its `base_model`) and drops the LM head.
        A LoRA policy (peft) gives a copy with its adapters merged in: the critic is a
        plain model that trains all its weights (peft's own `base_model` is the LoRA
        wrapper of the whole `*ForCausalLM`, which has no `last_hidden_state`).
        """
        model = cast("PreTrainedModel", policy_model)  # a transformers model, or peft's wrapper of one
        if hasattr(model, "merge_and_unload"):  # peft.PeftModel
            peft_model: Any = copy.deepcopy(model)  # peft's methods are not typed
            model = peft_model.merge_and_unload()
            body = model.base_model
        else:
            body = copy.deepcopy(getattr(model, "base_model", model))
        body.requires_grad_(True)
        return cls(body, int(model.config.hidden_size))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        hidden = self.body(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False
        ).last_hidden_state  # (B, L, H)
        values: Tensor = self.head(hidden.float()).squeeze(-1)  # (B, L)
        return values


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    global_tokens: float,
    clip: float | None = 0.2,
) -> tuple[Tensor, Tensor]:
    """PPO's clipped value loss, summed here and divided by the global token count.

    L_V = 0.5·max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²)  (verl `compute_value_loss`;
    PPO arXiv 1707.06347 §5 with value clipping). All inputs (B, T). Returns
    ``(loss, clipped (B, T))``.
    """
    err = (values - returns) ** 2  # (B, T)
    if clip is None:
        per_token, clipped = err, torch.zeros_like(err, dtype=torch.bool)
    else:
        v_clip = old_values + (values - old_values).clamp(-clip, clip)
        err_clip = (v_clip - returns) ** 2
        per_token, clipped = torch.maximum(err, err_clip), err_clip > err
    m = mask > 0
    return 0.5 * torch.where(m, per_token, torch.zeros_like(per_token)).sum() / max(
        global_tokens, 1.0
    ), clipped


class Critic:
    """The value model with its own optimizer, lr `value_lr_scale` × the actor's (VAPO: 2e-6 against 1e-6)."""

    def __init__(self, model: ValueModel, config: LearnerConfig, accelerator: Accelerator):
        self.config = config
        self.accelerator = accelerator
        disable_dropout(
            model
        )  # V at equal weights is the same in the update as in `values` (the clip's V_old)
        self.lr = config.value_lr_scale * config.lr  # VAPO §4.1: critic 2e-6 = 2 × actor 1e-6
        optimizer = torch.optim.AdamW(model.parameters(), lr=self.lr)
        self.model, self.optimizer = accelerator.prepare(model, optimizer)

    @torch.no_grad()
    def values(self, batch: TrainBatch) -> Tensor:
        """V at each target position (B, L-1), 0 on padding; eval mode, no grad, on the CPU."""
        was = self.model.training
        self.model.eval()
        pieces = []
        for mb in split_batch(batch, self.config.micro_batch_size):
            mb = mb.to(self.accelerator.device)
            v = self.model(mb.input_ids, mb.attention_mask)[:, :-1]  # (b, l-1): state before token t+1
            pieces.append(v.float().cpu())
        out = stack_rows(pieces, batch.loss_mask.shape)
        self.model.train(was)
        return out * (batch.attention_mask[:, 1:] > 0)

    def update(self, batch: TrainBatch, returns: Tensor, epochs: int = 1) -> dict[str, float]:
        """`epochs` × `num_minibatches` steps on the clipped value loss towards `returns` (B, L-1).

        The clip is around the values at the start of this call (V_old).
        """
        cfg, acc = self.config, self.accelerator
        old = self.values(batch)  # (B, L-1)
        losses, clip_n, tok_n = [], 0.0, 0.0
        self.model.train()
        for _ in range(epochs):
            for rows in torch.tensor_split(torch.arange(len(batch)), min(cfg.num_minibatches, len(batch))):
                mini = batch.select(rows)
                local = torch.tensor([mini.loss_mask.sum().item()], dtype=torch.float64, device=acc.device)
                global_tokens = acc.reduce(local, reduction="sum").item()
                if global_tokens == 0:
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                total = 0.0
                start = 0
                for mb in split_batch(mini, cfg.micro_batch_size):
                    rows_mb = rows[start : start + len(mb)]
                    start += len(mb)
                    w = mb.loss_mask.shape[1]
                    mb = mb.to(acc.device)
                    v = self.model(mb.input_ids, mb.attention_mask)[:, :-1]  # (b, l-1)
                    loss, clipped = value_loss(
                        v,
                        old[rows_mb, :w].to(acc.device),
                        returns[rows_mb, :w].to(acc.device),
                        mb.loss_mask,
                        global_tokens,
                        cfg.value_clip,
                    )
                    acc.backward(loss * acc.num_processes)
                    total += loss.item()
                    clip_n += (clipped & (mb.loss_mask > 0)).sum().item()
                    tok_n += mb.loss_mask.sum().item()
                acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm or float("inf"))
                self.optimizer.step()
                losses.append(total)
        # explained variance 1 − Var(R − V)/Var(R) of the values before this update (those the advantages
        # used, predicted before the critic saw these returns; CleanRL's ppo.py does the same)
        m = batch.loss_mask > 0
        var_r = returns[m].var() if m.sum() > 1 else torch.tensor(0.0)
        ev = 1 - (returns[m] - old[m]).var() / var_r if var_r > 0 else torch.tensor(0.0)
        return {
            "value/loss": sum(losses) / max(len(losses), 1),
            "value/clip_frac": clip_n / max(tok_n, 1.0),
            "value/explained_var": float(ev),
        }
