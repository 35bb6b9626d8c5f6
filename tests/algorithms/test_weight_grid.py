"""A sampler that holds its weights in bfloat16 (vLLM's fast CPU kernels) under a float32 learner: the learner
trains the weights the sampler runs (float32 masters, algorithms/weight_grid.py), so the mismatch stays the
engines' compute, not the sub-bf16-step updates the sampler never receives."""

from __future__ import annotations

import copy

import pytest
import torch

from argym.agents.hf import HFPolicy
from argym.algorithms.config import load_config
from argym.algorithms.weight_grid import SamplerGrid, narrower

from ..tiny_run import TINY_RUN


class Bf16Sampler:
    """A stand-in for a bf16 vLLM engine: its own copy of the policy, each weight rounded to bfloat16 when
    loaded (as `VLLMPolicy.load_weights` does), computing in float32 like the learner."""

    weights_dtype = torch.bfloat16

    def __init__(self, policy: HFPolicy):
        self.inner = HFPolicy(copy.deepcopy(policy.model), policy.tokenizer)
        self.tokenizer = policy.tokenizer
        self.load_weights(policy.model)

    def load_weights(self, model) -> float:
        with torch.no_grad():
            for mine, theirs in zip(self.inner.model.parameters(), model.parameters()):
                mine.copy_(theirs.to(torch.bfloat16))
        return 1e-3

    def generate(self, prompts, sampling, seed=None):
        return self.inner.generate(prompts, sampling, seed=seed)

    def close(self) -> None:
        pass


RAY_LEARNER = [
    "cluster.address=local",  # a Ray of its own, shut down when the run closes
    "cluster.num_cpus=2",
    "cluster.cpus_per_worker=0.25",
    "cluster.learner=true",
    "cluster.cpus_per_learner=0.5",
]


@pytest.mark.parametrize(
    "where",
    [
        [],
        pytest.param(
            RAY_LEARNER,
            marks=pytest.mark.full(
                reason="CI: in process; the Ray learner's exactness: tests/cluster/test_ray.py"
            ),
        ),
    ],
    ids=["in-process", "ray-learner"],
)
def test_a_bf16_sampler_samples_the_policy_the_learner_trains(tmp_path, monkeypatch, where):
    """Also with the learner in a Ray actor: the masters live there, the rounded weights come back."""
    from argym.algorithms import trainer as trainer_module

    monkeypatch.setattr(
        trainer_module, "build_generator", lambda cfg, policy, run_dir, *rest: Bf16Sampler(policy)
    )
    cfg = load_config(
        None,
        [
            *TINY_RUN,
            "rollout.tasks_per_step=3",
            "rollout.group_size=4",
            "rollout.max_new_tokens=8",
            "algorithm.lr=1e-4",
            "algorithm.entropy_coef=0.01",  # every step moves the weights, rewarded or not
            "steps=4",
            "eval.every=0",
            f"out_dir={tmp_path}",
            *where,
        ],
    )
    trainer = trainer_module.Trainer(cfg)
    try:
        assert where or trainer.learner.grid is not None
        for _ in range(cfg.steps):
            metrics = trainer.train_step()
            trainer.step += 1
            assert metrics["train/logprob_mismatch_max"] < 1e-4, metrics["train/logprob_mismatch_max"]
            for p in trainer.policy.model.parameters():  # what the sampler holds, exactly
                assert torch.equal(p, p.to(torch.bfloat16).float())
        assert metrics["train/grad_norm"] > 0
        trainer.save()
        if not where:
            masters = trainer.learner.grid.masters
    finally:
        trainer.close()
    saved = torch.load(tmp_path / "checkpoint" / "trainer_state.pt", weights_only=False)["learner"]["masters"]
    assert any(not torch.equal(m, m.to(torch.bfloat16).float()) for m in saved)  # float32 progress
    if not where:
        assert all(torch.equal(a, b) for a, b in zip(saved, masters))


def test_the_kl_reference_is_the_policy_the_sampler_starts_from(tmp_path, monkeypatch):
    """GRPO's KL under a bf16 sampler: the reference is copied from the float32 policy before the learner
    rounds it to the grid, so it must be rounded too, or KL(π_θ‖π_ref) is not 0 at step 0 and pulls every
    weight, even on a batch of flat groups, towards values the sampler never held."""
    from argym.algorithms import trainer as trainer_module

    monkeypatch.setattr(
        trainer_module, "build_generator", lambda cfg, policy, run_dir, *rest: Bf16Sampler(policy)
    )
    overrides = ["rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=4"]
    cfg = load_config(
        None, [*TINY_RUN, *overrides, "algorithm.kl_coef=0.04", "eval.every=0", f"out_dir={tmp_path}"]
    )
    trainer = trainer_module.Trainer(cfg)
    try:
        assert trainer.learner.grid is not None and trainer.learner.ref_model is not None
        for mine, ref in zip(trainer.policy.model.parameters(), trainer.learner.ref_model.parameters()):
            assert torch.equal(mine, ref)
        metrics = trainer.train_step()
    finally:
        trainer.close()
    assert metrics["train/kl_ref"] == 0.0 and metrics["train/kl_loss"] == 0.0


def test_updates_below_a_bf16_step_accumulate_in_the_masters():
    w = torch.nn.Parameter(torch.ones(3))
    grid = SamplerGrid([w], torch.bfloat16)
    opt = torch.optim.SGD([w], lr=1e-3)
    seen = []
    for _ in range(6):  # +0.001 a step; bf16's step at 1.0 is 2**-7 ≈ 0.0078 (a change shows from 0.0039)
        w.grad = -torch.ones(3)
        with grid.stepping():
            opt.step()
        seen.append(float(w[0].detach()))
    assert seen[:3] == [1.0, 1.0, 1.0] and seen[3:] == [1.0078125] * 3
    torch.testing.assert_close(grid.masters[0], torch.full((3,), 1.006))


def test_the_masters_survive_a_resume_and_fit_only_wider_weights():
    from accelerate import Accelerator

    from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    from argym.algorithms.learner import Learner, LearnerConfig

    model = build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(num_layers=1), seed=0)
    learner = Learner(model, LearnerConfig(lr=1e-3), Accelerator(cpu=True))
    assert learner.keep_weights_on(torch.bfloat16)
    for m in learner.grid.masters:
        m.add_(1e-5)  # progress the rounded weights do not show
    state = learner.state_dict()
    resumed = Learner(copy.deepcopy(model), LearnerConfig(lr=1e-3), Accelerator(cpu=True))
    resumed.load_state_dict(state)  # before the sampler exists, as the trainer resumes
    assert resumed.keep_weights_on(torch.bfloat16)
    assert all(torch.equal(a, b) for a, b in zip(resumed.grid.masters, learner.grid.masters))
    assert not narrower(torch.float32, model.parameters())
    assert not Learner(
        build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(num_layers=1), seed=0),
        LearnerConfig(),
        Accelerator(cpu=True),
    ).keep_weights_on(torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_narrower_compares_precision(dtype):
    assert narrower(dtype, [torch.nn.Parameter(torch.zeros(1))])
    assert not narrower(dtype, [torch.nn.Parameter(torch.zeros(1, dtype=dtype))])
