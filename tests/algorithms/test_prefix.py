"""Running each group's prompt once (algorithms/prefix.py) changes nothing but the number of tokens."""

from __future__ import annotations

import pytest
import torch

from argym.algorithms.prefix import plan_shared_prefix
from argym.types import Trajectory

from .test_learner import PAD, grads, learner


def shared_prompt_trajs(seed: int = 3) -> list[Trajectory]:
    """Three groups of four; prompts of different lengths per group, responses of different lengths,
    and a multi-turn row (policy, env reply, policy) whose env tokens are masked."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for group, plen in enumerate((3, 7, 5)):
        prompt = [1] + torch.randint(9, 32, (plen,), generator=g).tolist() + [2]
        for i in range(4):
            comp = torch.randint(4, 32, (2 + (group * 4 + i) % 5,), generator=g).tolist()
            mask = [1] * len(comp)
            if group == 1 and i == 2:
                env = torch.randint(9, 32, (4,), generator=g).tolist()
                comp, mask = comp + env + [5, 6], mask + [0] * len(env) + [1, 1]
            out.append(
                Trajectory(
                    task_id=f"t{group}",
                    messages=[],
                    reward=float(i % 2),
                    success=i % 2 == 1,
                    turns=1,
                    terminated=True,
                    truncated=False,
                    token_ids=prompt + comp,
                    loss_mask=[0] * len(prompt) + mask,
                    group=group,
                )
            )
    return out


@pytest.mark.parametrize(
    "cfg",
    [dict(), dict(entropy_coef=0.01), dict(micro_batch_size=5)],
    ids=["plain", "entropy", "groups-split-across-micro-batches"],
)
def test_shared_prompt_forward_gives_the_same_logprobs_and_gradients(cfg, monkeypatch):
    import argym.algorithms.forward as forward_mod  # the micro-batch forward looks it up there

    calls = []
    real = forward_mod.shared_prefix_logits
    monkeypatch.setattr(forward_mod, "shared_prefix_logits", lambda *a: calls.append(1) or real(*a))
    trajs = shared_prompt_trajs()
    out = {}
    for share in (True, False):
        lrn = learner(share_prompt_forward=share, **{"micro_batch_size": 12, **cfg})
        batch = lrn.prepare_batch(trajs, PAD)
        batch.old_logprobs -= 0.05 * batch.loss_mask  # a ratio away from 1, so clipping paths run too
        sums, _ = lrn.backward(batch)
        mask = batch.loss_mask
        out[share] = (lrn.logprobs(batch) * mask, grads(lrn), {k: v.item() for k, v in sums.items()})
    assert calls, "the shared-prompt path never ran"
    (lp1, g1, s1), (lp0, g0, s0) = out[True], out[False]
    torch.testing.assert_close(lp1, lp0, atol=1e-5, rtol=1e-5)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    for k in s0:
        assert s1[k] == pytest.approx(s0[k], rel=1e-5, abs=1e-7), k


def test_plan_applies_only_to_groups_that_share_their_prompt():
    lrn = learner()
    batch = lrn.prepare_batch(shared_prompt_trajs(), PAD)
    plan = plan_shared_prefix(batch)
    assert plan is not None and len(plan.leaders) == 3
    assert plan.prompt_len.tolist() == [5] * 4 + [9] * 4 + [7] * 4
    trajs = shared_prompt_trajs()
    trajs[1].token_ids[2] += 1  # one row's prompt differs from its group's
    assert plan_shared_prefix(lrn.prepare_batch(trajs, PAD)) is None
    single = [t for t in shared_prompt_trajs() if t.token_ids[-1] % 4 == 0][:1]
    assert plan_shared_prefix(lrn.prepare_batch(single, PAD)) is None  # nothing to share
