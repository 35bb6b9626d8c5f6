"""Trajectories → padded tensors for next-token training.

A `Trajectory` holds one exact token context (prompt, policy tokens, env
replies) with per-position fields (`loss_mask`, `sampler_logprobs`). For
next-token prediction the model's output at position t predicts token t + 1,
so every per-token field of `TrainBatch` is *target-aligned*: column t of a
(B, L − 1) tensor belongs to token ``input_ids[:, t + 1]``, i.e. it is the
trajectory field shifted by one (``traj.loss_mask[1:]``).

Infrastructure failures are dropped here and counted (docs/design.md, "score →
update" step 2), so no learner trains on a harness fault.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from argym.types import Trajectory


@dataclass
class TrainBatch:
    """Right-padded tensors for B trajectories of up to L tokens.

    Full-width (B, L): `input_ids` (pad_id after the end), `attention_mask`
    (1 on real tokens). Target-aligned (B, L − 1), float32, 0 on padding:
    `loss_mask` (1 where the target is a policy token), `sampler_logprobs` (the
    sampler's log-prob of the target, 0 where unknown), `advantages` (already
    multiplied by `loss_mask`), `token_rewards` (each turn's reward on its last
    policy token; whatever part of `traj.reward` the turns do not account for,
    e.g. an overlong penalty, on the last policy token); `old_logprobs` /
    `ref_logprobs` are filled in by the learner. Per-row (B,): `rewards`,
    `group_ids`, `has_sampler_logprobs` (False for agents that report none),
    `positive` (`traj.success`, VAPO's NLL set). `num_dropped` counts the infra
    failures left out.
    """

    input_ids: Tensor  # (B, L) long
    attention_mask: Tensor  # (B, L) long
    loss_mask: Tensor  # (B, L-1) float
    sampler_logprobs: Tensor  # (B, L-1) float
    advantages: Tensor  # (B, L-1) float
    rewards: Tensor  # (B,) float
    group_ids: Tensor  # (B,) long
    has_sampler_logprobs: Tensor  # (B,) bool
    token_rewards: Tensor | None = None  # (B, L-1) float
    positive: Tensor | None = None  # (B,) bool
    values: Tensor | None = None  # (B, L-1), the critic's V at each target position (VAPO)
    old_logprobs: Tensor | None = None  # (B, L-1), set by Learner.update
    ref_logprobs: Tensor | None = None  # (B, L-1), set by Learner.update when kl_coef > 0
    num_dropped: int = 0

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    @property
    def num_policy_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    def _map(self, fn: Callable[[str, Tensor], Tensor]) -> TrainBatch:
        """Apply ``fn(name, tensor)`` to every tensor field (rows come first in all of them)."""
        changed: dict[str, Any] = {
            f.name: fn(f.name, getattr(self, f.name))
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), Tensor)
        }
        return dataclasses.replace(self, **changed)

    def select(self, rows: Tensor | slice) -> TrainBatch:
        """The rows `rows` (an index tensor or a slice), every field kept aligned."""
        return self._map(lambda name, t: t[rows])

    def to(self, device: torch.device | str) -> TrainBatch:
        return self._map(lambda name, t: t.to(device))

    def trimmed(self) -> TrainBatch:
        """Drop the padding columns that no row uses (micro-batches are often shorter)."""
        width = max(int(self.attention_mask.sum(dim=1).max().item()), 2) if len(self) else 2

        def cut(name: str, t: Tensor) -> Tensor:
            if t.dim() == 1:
                return t  # (B,)
            return t[:, :width] if name in _FULL_WIDTH else t[:, : width - 1]

        return self._map(cut)


_FULL_WIDTH = ("input_ids", "attention_mask")


def split_batch(batch: TrainBatch, size: int) -> list[TrainBatch]:
    """Consecutive micro-batches of at most `size` rows, each trimmed of unused padding."""
    if size < 1:
        raise ValueError(f"micro-batch size must be >= 1, got {size}.")
    return [batch.select(slice(i, i + size)).trimmed() for i in range(0, len(batch), size)]


def whole_group_minibatches(
    groups: Tensor, n_minibatches: int, generator: torch.Generator | None
) -> list[Tensor]:
    """One epoch's mini-batches as row indices: whole groups, shuffled by `generator` (None: in order).

    verl counts its mini-batch in prompts (DAPO's 512 responses = 32 prompts × 16), and a whole
    group shares its prompt forward (algorithms/prefix.py); rows are split when there are fewer
    groups than mini-batches.
    """
    ids, inverse = torch.unique(groups, return_inverse=True)
    by_group = len(ids) >= n_minibatches
    units = len(ids) if by_group else len(groups)
    order = torch.randperm(units, generator=generator) if generator is not None else torch.arange(units)
    chunks = torch.tensor_split(order, n_minibatches)
    if not by_group:
        return list(chunks)
    return [torch.cat([torch.nonzero(inverse == g).flatten() for g in chunk.tolist()]) for chunk in chunks]


def stack_rows(pieces: list[Tensor], shape: torch.Size) -> Tensor:
    """Micro-batches' (b, l_k) rows stacked into one zero-padded (B, L) tensor: `split_batch`'s inverse for
    what a model computed per micro-batch."""
    out = torch.zeros(shape)
    start = 0
    for piece in pieces:
        out[start : start + len(piece), : piece.shape[1]] = piece
        start += len(piece)
    return out


def _check(i: int, traj: Trajectory) -> None:
    n = len(traj.token_ids)
    if n < 2:
        raise ValueError(
            f"Trajectory {i} ({traj.task_id!r}) has {n} token ids; training needs "
            "the exact token context (prompt + policy tokens), which agents acting "
            "on messages (oracle, HTTP) do not record."
        )
    if len(traj.loss_mask) != n:
        raise ValueError(
            f"Trajectory {i} ({traj.task_id!r}): loss_mask has {len(traj.loss_mask)} "
            f"entries for {n} token ids; the rollout engine must give one per token."
        )
    if traj.sampler_logprobs and len(traj.sampler_logprobs) != n:
        raise ValueError(
            f"Trajectory {i} ({traj.task_id!r}): sampler_logprobs has "
            f"{len(traj.sampler_logprobs)} entries for {n} token ids; give one per "
            "token (0 off-policy) or none."
        )
    if traj.loss_mask[0]:
        raise ValueError(
            f"Trajectory {i} ({traj.task_id!r}) starts with a policy token, which no "
            "position predicts; the context must begin with a prompt token."
        )


def make_batch(
    trajectories: Sequence[Trajectory], advantages: Tensor | Sequence[Sequence[float]], pad_id: int
) -> TrainBatch:
    """Pad `trajectories` into a `TrainBatch`, dropping (and counting) infra failures.

    `advantages` is aligned with `trajectories` (same length N, failures
    included) and is either one value per trajectory, shape (N,), broadcast to
    its policy tokens (outcome advantages), or one sequence per trajectory with
    one value per token id, position-aligned like `loss_mask` (token-level
    advantages from per-turn or process rewards). Either way the batch holds
    it target-aligned and zeroed off the policy tokens.
    """
    if len(advantages) != len(trajectories):
        raise ValueError(
            f"Got {len(advantages)} advantages for {len(trajectories)} trajectories; "
            "pass one per trajectory, infra failures included."
        )
    token_level = not isinstance(advantages, Tensor)
    if isinstance(advantages, Tensor) and advantages.dim() != 1:
        raise ValueError(
            f"A tensor of advantages must have shape (N,), got {tuple(advantages.shape)}; "
            "pass token-level advantages as one list per trajectory."
        )
    keep = [i for i, t in enumerate(trajectories) if not t.infra_failure]
    if not keep:
        raise ValueError(
            f"All {len(trajectories)} trajectories are infrastructure failures; "
            "there is nothing to train on (check the sandbox / grader logs)."
        )
    trajs = [trajectories[i] for i in keep]
    for i, t in zip(keep, trajs):
        _check(i, t)

    def pad(rows: list[Tensor], value: float) -> Tensor:
        return pad_sequence(rows, batch_first=True, padding_value=value)  # (B, L)

    ids = pad([torch.tensor(t.token_ids, dtype=torch.long) for t in trajs], pad_id)  # (B, L)
    lengths = torch.tensor([len(t.token_ids) for t in trajs])  # (B,)
    attention_mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()  # (B, L)
    loss_mask = pad([torch.tensor(t.loss_mask, dtype=torch.float32) for t in trajs], 0.0)[:, 1:]
    sampler = pad(
        [torch.tensor(t.sampler_logprobs or [0.0] * len(t.token_ids), dtype=torch.float32) for t in trajs],
        0.0,
    )[:, 1:]  # (B, L-1)
    if token_level:
        for i in keep:
            if len(advantages[i]) != len(trajectories[i].token_ids):
                raise ValueError(
                    f"Token-level advantages of trajectory {i} have "
                    f"{len(advantages[i])} entries for "
                    f"{len(trajectories[i].token_ids)} token ids."
                )
        adv = pad([torch.as_tensor(advantages[i], dtype=torch.float32) for i in keep], 0.0)[:, 1:]  # (B, L-1)
    else:
        assert isinstance(advantages, Tensor)  # not token-level: one advantage per trajectory
        adv = advantages.detach().to("cpu", torch.float32)[keep][:, None].expand_as(loss_mask)
    token_rewards = torch.zeros_like(loss_mask)  # (B, L-1)
    for b, t in enumerate(trajs):
        policy = [p for p, m in enumerate(t.loss_mask) if m]
        if not policy:
            continue
        for r, end in zip(t.turn_rewards, t.turn_ends):
            token_rewards[b, end - 1] += r  # target-aligned: column p − 1 holds token p
        rest = t.reward - sum(t.turn_rewards[: len(t.turn_ends)])
        token_rewards[b, policy[-1] - 1] += rest
    return TrainBatch(
        input_ids=ids,
        attention_mask=attention_mask,
        loss_mask=loss_mask,
        sampler_logprobs=sampler * loss_mask,
        advantages=adv * loss_mask,  # (B, L-1)
        rewards=torch.tensor([t.reward for t in trajs], dtype=torch.float32),
        group_ids=torch.tensor([t.group for t in trajs], dtype=torch.long),
        has_sampler_logprobs=torch.tensor([bool(t.sampler_logprobs) for t in trajs]),
        token_rewards=token_rewards * loss_mask,
        positive=torch.tensor([bool(t.success) for t in trajs]),
        num_dropped=len(trajectories) - len(keep),
    )
