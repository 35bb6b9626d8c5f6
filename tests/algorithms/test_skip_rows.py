"""`skip_zero_advantage_rows`: a row whose advantage is 0 on every policy token is left out of the training
forward and backward, and the update is the same; the metrics speak only of what ran."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from accelerate import Accelerator

from argym.algorithms.batch import make_batch
from argym.algorithms.learner import Learner, LearnerConfig
from argym.algorithms.learner_advantages import rows_to_run
from argym.types import Trajectory

from .test_learner import PAD, grads, learner, random_trajs, run_in_two_processes, tiny_model


def half_flat(seed: int = 1) -> list[Trajectory]:
    """`random_trajs`' two groups of 4, the second one flat (every reward 1): its rows have advantage 0."""
    return [dataclasses.replace(t, reward=1.0) if t.group == 1 else t for t in random_trajs(seed=seed)]


def count_rows(lrn: Learner) -> list[int]:
    """Rows each forward of the policy gets from now on (a list the hook appends to)."""
    seen: list[int] = []

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(0 if ids is None else ids.shape[0])

    lrn.accelerator.unwrap_model(lrn.model).register_forward_pre_hook(hook, with_kwargs=True)
    return seen


@pytest.mark.parametrize("policy_loss", ["ppo_clip", "gspo"])
def test_skipping_zero_advantage_rows_gives_the_same_update_from_half_the_rows(policy_loss):
    trajs = half_flat()
    out = []
    for skip in (False, True):
        lrn = learner(micro_batch_size=3, lr=1e-3, policy_loss=policy_loss, skip_zero_advantage_rows=skip)
        rows = count_rows(lrn)
        m = lrn.update(trajs, PAD)
        out.append((m, sum(rows), [p.detach().clone() for p in lrn.model.parameters()]))
    (m_all, rows_all, p_all), (m_skip, rows_skip, p_skip) = out
    assert (rows_all, rows_skip) == (8, 4)
    assert (m_all["train/rows_skipped"], m_skip["train/rows_skipped"]) == (0.0, 0.5)
    for key in ("train/loss", "train/grad_norm", "train/adv_mean", "train/varied_groups"):
        assert m_skip[key] == pytest.approx(m_all[key], rel=1e-5, abs=1e-7), key
    assert m_skip["train/optimizer_steps"] == 1
    for a, b in zip(p_skip, p_all):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_several_epochs_and_mini_batches_skip_the_same_rows_and_step_the_same():
    trajs = half_flat() + [dataclasses.replace(t, group=t.group + 2) for t in random_trajs(seed=3)]
    out = []
    for skip in (False, True):
        lrn = learner(
            micro_batch_size=2, lr=1e-3, num_minibatches=2, ppo_epochs=2, skip_zero_advantage_rows=skip
        )
        m = lrn.update(trajs, PAD)
        out.append((m, [p.detach().clone() for p in lrn.model.parameters()]))
    (m_all, p_all), (m_skip, p_skip) = out
    assert m_skip["train/rows_skipped"] == pytest.approx(4 / 16)
    assert m_skip["train/optimizer_steps"] == m_all["train/optimizer_steps"] == 4
    for a, b in zip(p_skip, p_all):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_a_batch_without_a_live_row_runs_no_forward_and_says_so():
    lrn = learner(lr=1e-3, skip_zero_advantage_rows=True)
    flat = [dataclasses.replace(t, reward=1.0) for t in random_trajs()]
    before = [p.detach().clone() for p in lrn.model.parameters()]
    rows = count_rows(lrn)
    m = lrn.update(flat, PAD)
    assert rows == [] and m["train/rows_skipped"] == 1.0 and m["train/optimizer_steps"] == 0
    assert not {"train/entropy", "train/clip_frac", "train/approx_kl"} & m.keys()  # nothing was measured
    for a, b in zip(before, lrn.model.parameters()):
        assert torch.equal(a, b.detach())


def test_a_kl_term_or_an_entropy_bonus_keeps_every_row():
    for cfg in (dict(kl_coef=0.05), dict(entropy_coef=0.01)):
        lrn = Learner(
            tiny_model(),
            LearnerConfig(skip_zero_advantage_rows=True, **cfg),
            Accelerator(cpu=True),
            ref_model=tiny_model(100) if "kl_coef" in cfg else None,
        )
        assert lrn.update(half_flat(), PAD)["train/rows_skipped"] == 0.0, cfg


def test_the_mismatch_metric_counts_only_rows_whose_pi_old_was_taken():
    """On-policy, π_old is the training forward: a skipped row has none, and comparing its zeros with the
    sampler's log-probs would report a mismatch of whole nats."""
    trajs = half_flat()
    own = learner(micro_batch_size=3).logprobs(make_batch(trajs, torch.zeros(8), PAD))  # (B, L-1)
    for i, t in enumerate(trajs):  # position-aligned: sampler_logprobs[t] scores token t
        t.sampler_logprobs = [0.0] + [
            lp * m for lp, m in zip(own[i, : len(t.token_ids) - 1].tolist(), t.loss_mask[1:])
        ]
    m = learner(micro_batch_size=3, skip_zero_advantage_rows=True).update(trajs, PAD)
    assert m["train/rows_skipped"] == 0.5
    assert m["train/logprob_mismatch_mean"] < 1e-5 and m["train/logprob_mismatch_max"] < 1e-4


def _two_process_grads(out: str) -> None:
    """Each process takes the groups `g % world == rank`; every group of rank 1 is flat, so with skipping it
    has no live row while rank 0 has some. Saves the gradient of one backward."""
    acc = Accelerator(cpu=True)
    rank, world = acc.process_index, acc.num_processes
    trajs = [dataclasses.replace(t, reward=1.0) if t.group % 2 else t for t in random_trajs(12, group_size=3)]
    mine = [t for t in trajs if t.group % world == rank]
    for skip in (False, True):
        lrn = Learner(tiny_model(), LearnerConfig(micro_batch_size=2, skip_zero_advantage_rows=skip), acc)
        batch = lrn.prepare_batch(mine, PAD)
        run = rows_to_run(batch, lrn.config, acc, lrn.fsdp)
        lrn.backward(batch, run)
        torch.save((grads(lrn), run), f"{out}/{skip}_{world}_{rank}.pt")


@pytest.mark.slow
def test_a_process_without_a_live_row_still_joins_the_gradient_reduction(tmp_path):
    """Two gloo processes, rank 1 holding only flat groups: it runs one row (advantage 0) so that DDP's
    reduction in the last backward has both processes, and the gradient is the single process's without
    skipping (a rank that ran no backward would leave the other waiting)."""
    run_in_two_processes(_two_process_grads, tmp_path)
    _two_process_grads(str(tmp_path))  # this process alone: world size 1
    single, _ = torch.load(tmp_path / "False_1_0.pt")
    for rank, ran in ((0, 6), (1, 1)):
        got, run = torch.load(tmp_path / f"True_2_{rank}.pt")
        assert int(run.sum()) == ran, rank
        for a, b in zip(got, single):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
