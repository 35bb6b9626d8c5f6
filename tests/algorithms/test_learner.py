"""Batching and the learner on a tiny Qwen2: exact π_old, micro-batch and process
invariance of the gradient, infra-failure exclusion, mismatch metric, learning signal."""

from __future__ import annotations

import copy
import dataclasses
import pathlib
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
import torch
from accelerate import Accelerator
from transformers import Qwen2Config, Qwen2ForCausalLM

from argym.algorithms.batch import make_batch, split_batch, whole_group_minibatches
from argym.algorithms.learner import Learner, LearnerConfig
from argym.errors import ConfigError
from argym.types import Trajectory

PAD = 0
PROMPT = [1, 2, 3]
PATTERN = [5, 6, 7, 8]


def tiny_model(seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return Qwen2ForCausalLM(cfg)


def traj(completion: list[int], reward: float, group: int, prompt: list[int] = PROMPT, **kw) -> Trajectory:
    return Trajectory(
        task_id=f"t{group}",
        messages=[],
        reward=reward,
        success=reward > 0,
        turns=1,
        terminated=True,
        truncated=False,
        token_ids=prompt + completion,
        loss_mask=[0] * len(prompt) + [1] * len(completion),
        group=group,
        **kw,
    )


def random_trajs(n: int = 8, group_size: int = 4, seed: int = 1) -> list[Trajectory]:
    """Groups of mixed rewards, varied prompt and completion lengths (so padding matters)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        prompt = [1] + torch.randint(9, 32, (i % 3,), generator=g).tolist() + [2]
        comp = torch.randint(4, 32, (2 + (i * 5) % 7,), generator=g).tolist()
        out.append(
            traj(comp, float(torch.rand(1, generator=g) > 0.5) + 0.1 * i, i // group_size, prompt=prompt)
        )
    return out


def learner(seed: int = 0, ref: bool = False, **cfg) -> Learner:
    return Learner(
        tiny_model(seed),
        LearnerConfig(**cfg),
        Accelerator(cpu=True),
        ref_model=tiny_model(seed + 100) if ref else None,
    )


def grads(lrn: Learner) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in lrn.model.parameters()]


# ----------------------------------------------------------------------------- batch


def test_make_batch_fields_are_target_aligned():
    t1 = traj([5, 6], 1.0, 0, sampler_logprobs=[0, 0, 0, -0.5, -0.25])
    t2 = Trajectory(
        task_id="m",
        messages=[],
        reward=0.0,
        success=False,
        turns=2,
        terminated=True,
        truncated=False,
        token_ids=[1, 9, 4, 10, 11, 4],
        loss_mask=[0, 0, 1, 0, 0, 1],
        group=0,
    )  # two turns: policy, env reply, policy
    b = make_batch([t1, t2], torch.tensor([2.0, -1.0]), pad_id=PAD)
    assert b.input_ids.tolist() == [[1, 2, 3, 5, 6, PAD], [1, 9, 4, 10, 11, 4]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1, 1, 0], [1] * 6]
    assert b.loss_mask.tolist() == [[0, 0, 1, 1, 0], [0, 1, 0, 0, 1]]  # traj.loss_mask[1:]
    assert b.advantages.tolist() == [[0, 0, 2, 2, 0], [0, -1, 0, 0, -1]]
    assert b.sampler_logprobs.tolist() == [[0, 0, -0.5, -0.25, 0], [0] * 5]
    assert b.has_sampler_logprobs.tolist() == [True, False]
    assert b.rewards.tolist() == [1.0, 0.0] and b.group_ids.tolist() == [0, 0]
    assert b.num_dropped == 0 and b.num_policy_tokens == 4


def test_make_batch_drops_infra_failures_and_token_level_advantages():
    bad = traj([7], 1.0, 0, infra_failure=True)
    good = traj([5, 6], 0.0, 0)
    b = make_batch([bad, good], [[9.0] * 4, [0, 0, 0, 0.5, 0.25]], pad_id=PAD)
    assert len(b) == 1 and b.num_dropped == 1
    assert b.advantages.tolist() == [[0, 0, 0.5, 0.25]]
    with pytest.raises(ValueError, match="infrastructure failures"):
        make_batch([bad], torch.zeros(1), pad_id=PAD)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda t: t.loss_mask.pop(), "loss_mask has"),
        (lambda t: t.sampler_logprobs.extend([0.0]), "sampler_logprobs has"),
        (lambda t: t.loss_mask.__setitem__(0, 1), "starts with a policy token"),
        (lambda t: (t.token_ids.clear(), t.loss_mask.clear()), "token ids"),
    ],
)
def test_make_batch_rejects_bad_trajectories(mutate, match):
    t = traj([5, 6], 1.0, 0)
    mutate(t)
    with pytest.raises(ValueError, match=match):
        make_batch([t], torch.zeros(1), pad_id=PAD)


def test_split_batch_trims_padding():
    trajs = [traj([5] * n, 0.0, 0) for n in (1, 6, 2)]
    parts = split_batch(make_batch(trajs, torch.zeros(3), PAD), 2)
    assert [len(p) for p in parts] == [2, 1]
    assert parts[0].input_ids.shape == (2, 9) and parts[0].loss_mask.shape == (2, 8)
    assert parts[1].input_ids.shape == (1, 5) and parts[1].advantages.shape == (1, 4)


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(lr=0), "lr must be"),
        (dict(clip_low=1.0), "clip_low"),
        (dict(dual_clip=1.0), "dual_clip"),
        (dict(num_minibatches=0), "num_minibatches"),
        (dict(temperature=0), "temperature"),
        (dict(advantage="grop"), "Did you mean: grpo"),
        (dict(loss_agg="seq-mean-token-sum-norm"), "loss_agg_constant"),
        (dict(kl_estimator="k4"), "KL estimator"),
    ],
)
def test_config_validation(kw, match):
    with pytest.raises(ConfigError, match=match):
        LearnerConfig(**kw)


def test_kl_needs_reference_model():
    with pytest.raises(ConfigError, match="ref_model"):
        learner(kl_coef=0.1)


# ----------------------------------------------------------------------------- learner


def test_old_logprobs_match_manual_computation_at_temperature():
    lrn = learner(temperature=0.7, micro_batch_size=3)
    batch = make_batch(random_trajs(), torch.zeros(8), PAD)
    got = lrn.logprobs(batch)
    model = lrn.model.eval()
    with torch.no_grad():
        for i in range(len(batch)):  # one unpadded sequence at a time
            n = int(batch.attention_mask[i].sum())
            ids = batch.input_ids[i : i + 1, :n]
            logits = model(ids).logits[0, :-1] / 0.7
            want = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
            torch.testing.assert_close(got[i, : n - 1], want, atol=1e-5, rtol=1e-5)
            assert (got[i, n - 1 :] == 0).all()


@pytest.mark.parametrize(
    "loss_agg,policy_loss",
    [
        ("token-mean", "ppo_clip"),
        ("seq-mean-token-mean", "ppo_clip"),
        ("seq-mean-token-sum-norm", "ppo_clip"),
        ("seq-mean-token-mean", "gspo"),
        ("token-mean", "gspo_token"),
    ],
)
def test_gradient_is_independent_of_micro_batch_size(loss_agg, policy_loss):
    cfg = dict(
        loss_agg=loss_agg,
        loss_agg_constant=16.0,
        kl_coef=0.05,
        entropy_coef=0.01,
        nll_coef=0.1,
        policy_loss=policy_loss,
        clip_low=0.05,
        clip_high=0.08,
    )
    trajs = random_trajs()
    results = []
    for mbs in (8, 3, 1):
        lrn = learner(ref=True, micro_batch_size=mbs, **cfg)
        batch = lrn.prepare_batch(trajs, PAD)
        batch.old_logprobs -= 0.1 * batch.loss_mask  # ratio ≠ 1 so the clip is exercised
        sums, _ = lrn.backward(batch)
        results.append((grads(lrn), sums["loss"].item()))
    (g_ref, loss_ref) = results[0]
    for g, loss in results[1:]:
        assert loss == pytest.approx(loss_ref, rel=1e-5, abs=1e-7)
        for a, b in zip(g, g_ref):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_update_is_independent_of_micro_batch_size():
    trajs = random_trajs()
    out = []
    for mbs in (8, 1):
        lrn = learner(micro_batch_size=mbs, num_minibatches=2, ppo_epochs=2, lr=1e-3)
        metrics = lrn.update(trajs, PAD)
        out.append((metrics, [p.detach().clone() for p in lrn.model.parameters()]))
    (m8, p8), (m1, p1) = out
    for key in ("train/loss", "train/grad_norm", "train/clip_frac", "train/approx_kl", "train/entropy"):
        assert m1[key] == pytest.approx(m8[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(p1, p8):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    assert m8["train/optimizer_steps"] == 4


def test_on_policy_first_step_has_ratio_one():
    metrics = learner().update(random_trajs(), PAD)
    assert metrics["train/clip_frac"] == 0.0
    assert abs(metrics["train/approx_kl"]) < 1e-7
    assert metrics["train/grad_norm"] > 0
    assert metrics["train/entropy"] > 0


def test_lr_warmup_ramps_the_first_steps_and_a_resumed_learner_goes_on_where_it_stopped():
    """lr_warmup_steps=3: the optimizer steps take lr/3, 2·lr/3, then lr; a learner loaded from the state
    after two steps takes its next steps at lr, as the uninterrupted one did (AdamW's own step count)."""

    def taken_lrs(lrn: Learner, updates: int) -> list[float]:
        seen: list[float] = []
        real = lrn.optimizer.step

        def step(*args, **kwargs):
            seen.append(lrn.optimizer.param_groups[0]["lr"])
            return real(*args, **kwargs)

        lrn.optimizer.step = step
        for _ in range(updates):
            lrn.update(random_trajs(), PAD)
        return seen

    cfg = dict(lr=1e-3, lr_warmup_steps=3, num_minibatches=2)  # two optimizer steps per update
    straight = taken_lrs(learner(**cfg), 2)
    assert straight == pytest.approx([1e-3 / 3, 2e-3 / 3, 1e-3, 1e-3])
    first = learner(**cfg)
    assert taken_lrs(first, 1) == pytest.approx(straight[:2])
    resumed = learner(**cfg)
    resumed.load_state_dict(first.state_dict())
    assert taken_lrs(resumed, 1) == pytest.approx(straight[2:])
    assert taken_lrs(learner(lr=1e-3, num_minibatches=2), 1) == [1e-3, 1e-3]  # the default: no warm-up


def test_infra_failures_are_excluded():
    trajs = random_trajs()
    # a failed episode in group 0 with an outlying reward: kept, it would shift group 0's advantages
    failed = traj([9, 9, 9], 50.0, 0, infra_failure=True)
    a, b = learner(), learner()
    a.backward(a.prepare_batch(trajs, PAD))
    batch_b = b.prepare_batch(trajs[:2] + [failed] + trajs[2:], PAD)
    assert batch_b.num_dropped == 1 and len(batch_b) == 8
    b.backward(batch_b)
    for ga, gb in zip(grads(a), grads(b)):
        torch.testing.assert_close(ga, gb)
    assert learner().update(trajs + [failed], PAD)["train/infra_dropped"] == 1
    assert learner().update([failed], PAD) == {"train/infra_dropped": 1.0}


def test_logprob_mismatch_metric():
    trajs = random_trajs()
    lrn = learner(micro_batch_size=3)
    own = lrn.logprobs(make_batch(trajs, torch.zeros(8), PAD))  # (B, L-1), target-aligned
    for i, t in enumerate(trajs):  # position-aligned: sampler_logprobs[t] scores token t
        t.sampler_logprobs = [0.0] + [
            lp * m for lp, m in zip(own[i, : len(t.token_ids) - 1].tolist(), t.loss_mask[1:])
        ]
    assert learner().update(trajs, PAD)["train/logprob_mismatch_mean"] < 1e-5
    for t in trajs:
        t.sampler_logprobs = [lp - 0.3 * m for lp, m in zip(t.sampler_logprobs, t.loss_mask)]
    m = learner().update(trajs, PAD)
    assert m["train/logprob_mismatch_mean"] == pytest.approx(0.3, abs=1e-4)
    assert m["train/logprob_mismatch_max"] == pytest.approx(0.3, abs=1e-4)
    assert "train/logprob_mismatch_mean" not in learner().update(random_trajs(), PAD)


def test_update_raises_logprob_of_rewarded_pattern():
    g = torch.Generator().manual_seed(0)
    trajs = []
    for group in range(4):
        trajs += [traj(PATTERN, 1.0, group) for _ in range(2)]
        trajs += [traj(torch.randint(9, 32, (4,), generator=g).tolist(), 0.0, group) for _ in range(2)]
    lrn = learner(lr=3e-3, micro_batch_size=4, num_minibatches=2)
    probe = make_batch([traj(PATTERN, 1.0, 0)], torch.zeros(1), PAD)

    def pattern_logprob() -> float:
        return float((lrn.logprobs(probe) * probe.loss_mask).sum())

    before = pattern_logprob()
    for _ in range(5):
        metrics = lrn.update(trajs, PAD)
    assert metrics["train/group_reward_std"] == pytest.approx((1 / 3) ** 0.5, rel=1e-5)  # {1,1,0,0}
    assert pattern_logprob() > before + 2.0  # 4 tokens from ~log(1/32) each


def test_varied_groups_is_the_share_of_groups_with_unequal_rewards():
    """`train/varied_groups`: groups whose rewards differ beyond float32 rounding, over all groups (a group
    of one cannot differ): what a group-relative advantage learns from, so a run stuck at 0 shows it."""
    rewards = {0: [1.0, 0.0], 1: [1.0, 1.0], 2: [0.5, 0.5 * (1 + 2**-23)], 3: [0.2, 0.3], 4: [1.0]}
    trajs = [traj(PATTERN, r, g) for g, rs in rewards.items() for r in rs]
    assert learner().update(trajs, PAD)["train/varied_groups"] == pytest.approx(2 / 5)
    flat = [traj(PATTERN, 1.0, g) for g in range(3) for _ in range(2)]
    assert learner().update(flat, PAD)["train/varied_groups"] == 0.0


def _process_count_grads(out: str) -> None:
    """Each process takes the groups `g % world == rank`, builds the same model and saves its
    gradient after one mini-batch, for two aggregation modes."""
    acc = Accelerator(cpu=True)
    rank, world = acc.process_index, acc.num_processes
    mine = [t for t in random_trajs(12, group_size=3) if t.group % world == rank]
    for loss_agg in ("token-mean", "seq-mean-token-mean"):
        lrn = Learner(tiny_model(), LearnerConfig(loss_agg=loss_agg, micro_batch_size=2), acc)
        lrn.backward(lrn.prepare_batch(mine, PAD))
        torch.save(grads(lrn), f"{out}/{loss_agg}_{world}_{rank}.pt")


MULTIPROCESS_SCRIPT = textwrap.dedent("""
    import sys
    from accelerate import debug_launcher
    sys.path.insert(0, {root!r})
    from tests.algorithms.{module} import {function}

    if __name__ == "__main__":
        debug_launcher({function}, args=(sys.argv[1],), num_processes=2)
""")


def run_in_two_processes(function: Callable[[str], None], out: pathlib.Path) -> None:
    """`function(str(out))`, a module-level function of a test module here, in two gloo processes (accelerate's
    `debug_launcher`), from a script of its own: the test's process stays single."""
    script = out / "mp.py"
    module = function.__module__.rsplit(".", 1)[-1]
    root = str(pathlib.Path(__file__).parents[2])
    script.write_text(MULTIPROCESS_SCRIPT.format(root=root, module=module, function=function.__name__))
    proc = subprocess.run(
        [sys.executable, str(script), str(out)], timeout=300, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_gradient_is_independent_of_process_count(tmp_path):
    """Two gloo processes, each with half the groups (and unequal token counts), give the
    single-process gradient: the normaliser is global and DDP's averaging is undone."""
    run_in_two_processes(_process_count_grads, tmp_path)
    _process_count_grads(str(tmp_path))  # this process alone: world size 1
    for loss_agg in ("token-mean", "seq-mean-token-mean"):
        single = torch.load(tmp_path / f"{loss_agg}_1_0.pt")
        for rank in (0, 1):
            for a, b in zip(torch.load(tmp_path / f"{loss_agg}_2_{rank}.pt"), single):
                torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)


def test_kl_in_reward_lowers_rewards_before_the_estimator():
    trajs = random_trajs()
    lrn = learner(ref=True, kl_coef=0.5, kl_estimator="k1", kl_in_reward=True, advantage="rloo")
    batch = lrn.prepare_batch(trajs, PAD)
    kl = ((batch.old_logprobs - batch.ref_logprobs) * batch.loss_mask).sum(-1)  # (B,) k1 summed per response
    from argym.algorithms.advantages import AdvantageInputs, rloo_advantage

    want = rloo_advantage(AdvantageInputs(batch.rewards - 0.5 * kl, batch.group_ids), lrn.config)
    torch.testing.assert_close(batch.advantages, want[:, None] * batch.loss_mask)
    metrics = lrn.update(trajs, PAD)
    assert "train/kl_loss" in metrics and metrics["train/kl_loss"] == 0.0  # not in the loss as well


def _token_whitened(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(x − mean) / (std + 1e-6) over the policy tokens, by hand (Bessel std, as verl's masked_whiten)."""
    vals = x[mask > 0].double()
    return ((x.double() - vals.mean()) / (vals.std() + 1e-6) * mask).float()


def test_reinforce_pp_whitens_over_tokens_not_sequences():
    """REINFORCE++ eq. 7 as its paper, OpenRLHF and verl: mean and std over every policy token of the
    batch, so a long response counts once per token (responses here have 2 to 8 tokens)."""
    trajs = random_trajs()
    for name in ("reinforce++", "reinforce++_baseline"):
        lrn = learner(advantage=name)
        batch = lrn.prepare_batch(trajs, PAD)
        outcome = batch.rewards
        if name == "reinforce++_baseline":
            from argym.algorithms.advantages import group_moments

            mean, _, _, index = group_moments(outcome, batch.group_ids)
            outcome = (outcome - mean[index]).float()
        want = _token_whitened(outcome[:, None] * batch.loss_mask, batch.loss_mask)
        torch.testing.assert_close(batch.advantages, want, atol=1e-5, rtol=1e-5, msg=name)
        assert abs(batch.advantages[batch.loss_mask > 0].mean().item()) < 1e-5


def test_reinforce_pp_kl_in_the_reward_gives_each_token_its_future_return():
    """With the KL in the reward (arXiv 2501.03262 eq. 5-6), token t's return is r − β Σ_{s≥t} KL_s."""
    trajs = random_trajs()
    lrn = learner(ref=True, kl_coef=0.5, kl_estimator="k1", kl_in_reward=True, advantage="reinforce++")
    batch = lrn.prepare_batch(trajs, PAD)
    mask = batch.loss_mask
    kl = (batch.old_logprobs - batch.ref_logprobs) * mask  # (B, T) k1 per token
    future_kl = kl.flip(1).cumsum(1).flip(1)  # Σ_{s≥t} KL_s
    returns = (batch.rewards[:, None] - 0.5 * future_kl) * mask
    torch.testing.assert_close(batch.advantages, _token_whitened(returns, mask), atol=1e-5, rtol=1e-4)
    assert kl.abs().sum() > 0.1  # the two models differ: the KL terms are not vanishing


def test_nll_on_positive_samples_only():
    trajs = random_trajs()
    for t in trajs:
        t.success = False
    lrn = learner(nll_coef=1.0)
    batch = lrn.prepare_batch(trajs, PAD)
    batch.advantages.zero_()
    assert lrn.backward(batch)[0]["nll"].item() == 0.0  # no positive sample: no NLL
    batch.positive[:] = torch.tensor([True] + [False] * (len(batch) - 1))
    sums, _ = lrn.backward(batch)
    want = -(batch.old_logprobs[0] * batch.loss_mask[0]).sum() / batch.loss_mask[0].sum()
    assert sums["nll"].item() == pytest.approx(want.item(), rel=1e-5)


LAUNCH_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from accelerate import Accelerator
    sys.path.insert(0, {test_dir!r})
    from test_learner import PAD, random_trajs, tiny_model
    from argym.algorithms.learner import Learner, LearnerConfig
    from argym.algorithms.presets import get_preset

    out = sys.argv[1]
    acc = Accelerator(cpu=True)
    rank, world = acc.process_index, acc.num_processes
    assert world == int(sys.argv[2]), (world, sys.argv[2])
    mine = [t for t in random_trajs(12, group_size=3) if t.group % world == rank]
    for name in ("grpo", "dapo", "gspo", "drgrpo", "reinforce++"):
        base = get_preset(name).learner
        cfg = LearnerConfig(**{{**base.__dict__, "lr": 1e-3, "micro_batch_size": 2, "num_minibatches": 2,
                                "ppo_epochs": 2, "shuffle": False, "kl_coef": 0.0, "loss_agg_constant": 16.0,
                                "fsdp": sys.argv[3:] == ["fsdp"]}})
        lrn = Learner(tiny_model(), cfg, acc)
        metrics = lrn.update(mine, PAD)
        params = [p.detach().cpu().clone() for p in acc.unwrap_model(lrn.model).parameters()]
        torch.save((params, metrics["train/loss"]), f"{{out}}/{{name}}_{{world}}_{{rank}}.pt")
        if cfg.fsdp:  # AdamW holds the shards; the checkpoint's whole weights are the gathered ones generation uses
            from argym.algorithms import fsdp
            from torch.distributed.tensor import DTensor
            assert all(isinstance(p, DTensor) for p in lrn.optimizer.param_groups[0]["params"])
            full = fsdp.full_weights(lrn.model)
            if rank == 0:
                for k, p in lrn.model.named_parameters():
                    assert torch.equal(full[k], p.detach().cpu()), k
                # evaluation runs on the main process alone: its fingerprint reads the gathered weights
                from argym.agents.evaluate import weights_fingerprint
                plain = tiny_model()
                plain.load_state_dict(full)
                assert weights_fingerprint(lrn.model) == weights_fingerprint(plain)
            # each rank generates alone, a different number of tokens and calls: no forward waits for the other
            for _ in range(rank + 1):
                lrn.model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3 + 4 * rank, do_sample=False,
                                   min_new_tokens=3 + 4 * rank, synced_gpus=False)
""")


def _launch_update(out: pathlib.Path, processes: int, *mode: str) -> None:
    """LAUNCH_SCRIPT under `accelerate launch` with `processes` CPU processes; `mode` ("fsdp") goes to it."""
    import os
    import shutil

    script = out / "launch.py"
    script.write_text(LAUNCH_SCRIPT.format(test_dir=str(pathlib.Path(__file__).parent)))
    accelerate = shutil.which("accelerate", path=str(pathlib.Path(sys.executable).parent)) or "accelerate"
    # --cpu takes accelerate's single-process launcher; --multi_gpu starts torchrun, and the
    # script's Accelerator(cpu=True) then runs the processes on the CPU over gloo
    launcher = ["--cpu"] if processes == 1 else ["--multi_gpu"]
    cmd = [accelerate, "launch", *launcher, "--num_processes", str(processes), "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(out), str(processes), *mode]
    proc = subprocess.run(
        cmd, timeout=300, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _assert_update_equals_single_process(out: pathlib.Path) -> None:
    for name in (
        "grpo",
        "dapo",
        "gspo",
        "drgrpo",
        "reinforce++",
    ):  # reinforce++: whitening over all processes
        single, loss1 = torch.load(out / f"{name}_1_0.pt")
        for rank in (0, 1):
            params, loss2 = torch.load(out / f"{name}_2_{rank}.pt")
            assert loss2 == pytest.approx(loss1, abs=1e-5), name
            for a, b in zip(params, single):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=name)


@pytest.mark.slow
def test_accelerate_launch_two_processes_update_equals_single_process(tmp_path):
    """`accelerate launch` with 2 CPU processes (gloo): a whole update (2 epochs × 2 mini-batches,
    AdamW, grad clipping) of the GRPO, DAPO, GSPO, Dr.GRPO and REINFORCE++ presets ends at the single-process
    parameters to 1e-5. Each process holds whole groups, so group advantages agree; mini-batches
    are split per process (rows 0..k of each), i.e. the same global rows as the single process."""
    _launch_update(tmp_path, 1)
    _launch_update(tmp_path, 2)
    _assert_update_equals_single_process(tmp_path)


def test_fsdp_learner_refuses_the_models_it_does_not_shard():
    from types import SimpleNamespace

    from argym.algorithms.fsdp import check as check_fsdp

    check_fsdp(SimpleNamespace(mixed_precision="no"), None, None)  # the supported case
    for acc, ref, critic, said in [
        ("no", tiny_model(), None, "KL reference model"),
        ("no", None, object(), "critic"),
        ("bf16", None, None, "mixed_precision='bf16'"),
    ]:
        with pytest.raises(ConfigError, match=said):
            check_fsdp(SimpleNamespace(mixed_precision=acc), ref, critic)


@pytest.mark.slow
def test_fsdp_two_processes_update_equals_single_process(tmp_path):
    """The same update with `fsdp: true` (FSDP2 over 2 gloo processes: gradients reduce-scattered, AdamW on the
    shards, clipping by the global norm over the shards) ends at the single-process parameters to 1e-5, and the
    whole weights a checkpoint saves are the gathered ones."""
    _launch_update(tmp_path, 1)
    _launch_update(tmp_path, 2, "fsdp")
    _assert_update_equals_single_process(tmp_path)


@pytest.mark.parametrize("tis_cap", [None, 1.5], ids=["plain", "tis"])
def test_on_policy_update_reuses_the_training_forward_for_pi_old(monkeypatch, tis_cap):
    """One epoch, one mini-batch: skipping the separate π_old pass changes nothing but the time, also
    with a truncated importance weight min(π_old/μ, C), which then comes from the training forward.
    The logged advantages are the estimator's on both paths: the weight acts in the loss only."""
    assert learner(tis_cap=tis_cap).reuses_training_forward
    trajs = random_trajs()
    rng = random.Random(7)
    for t in trajs:  # μ spread around π_old so that some weights are capped and some are below 1
        t.sampler_logprobs = [-rng.uniform(0.0, 8.0) for _ in t.token_ids]
    out = []
    for reuse in (True, False):
        lrn = learner(micro_batch_size=3, lr=1e-3, tis_cap=tis_cap)
        monkeypatch.setattr(Learner, "reuses_training_forward", property(lambda self, r=reuse: r))
        m = lrn.update(trajs, PAD)
        m["samples"] = lrn.sample_advantages  # what the step's samples log as each one's advantage
        out.append((m, [p.detach().clone() for p in lrn.model.parameters()]))
    (m1, p1), (m2, p2) = out
    for key in ("train/loss", "train/grad_norm", "train/logprob_mismatch_mean", "train/clip_frac"):
        assert m1[key] == pytest.approx(m2[key], rel=1e-5, abs=1e-6), key
    for key in ("train/adv_mean", "train/adv_std", "samples"):  # the estimator's, whichever path π_old took
        assert m1[key] == pytest.approx(m2[key], rel=1e-6, abs=1e-7), key
    if tis_cap is not None:  # the weight took effect: the gradient is not the unweighted one
        assert learner(micro_batch_size=3, lr=1e-3).update(trajs, PAD)["train/grad_norm"] != pytest.approx(
            m1["train/grad_norm"], rel=1e-3
        )
    for a, b in zip(p1, p2):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_mini_batches_hold_whole_groups():
    """As verl's mini-batch (counted in prompts): each group lands whole in one mini-batch, so its shared
    prompt runs once there (algorithms/prefix.py); with fewer groups than mini-batches, rows are split."""
    lrn = learner(num_minibatches=2)
    groups = torch.tensor([t.group for t in random_trajs(12, group_size=3)])  # 4 groups of 3
    for _ in range(3):  # reshuffled every call
        parts = whole_group_minibatches(groups, 2, lrn._shuffle_gen)
        assert sorted(torch.cat(parts).tolist()) == list(range(12))
        assert [len(p) for p in parts] == [6, 6]
        assert all(len(set(groups[p].tolist())) == 2 for p in parts)  # two whole groups each
    parts = whole_group_minibatches(groups, 5, lrn._shuffle_gen)  # 4 groups, 5 mini-batches: rows
    assert sorted(torch.cat(parts).tolist()) == list(range(12)) and len(parts) == 5


def test_a_batch_without_signal_leaves_the_weights_alone():
    """Every group flat (each advantage 0, no KL/entropy/NLL term): the gradient is exactly 0, and an AdamW
    step on it would still move every weight along the moments the last batch left (by about 0.67 × lr ×
    sign on the next step, 3.6 × lr over the next twelve). That drift, with no evidence behind it, wrecked a
    warm-started tool-calling policy in 12 flat steps; a flat batch now takes no optimizer step."""
    lrn = learner(lr=1e-3)
    assert lrn.update(random_trajs(), PAD)["train/optimizer_steps"] == 1
    before = [p.detach().clone() for p in lrn.model.parameters()]
    flat = [traj(t.token_ids[3:], 1.0, t.group) for t in random_trajs()]
    metrics = lrn.update(flat, PAD)
    assert metrics["train/grad_norm"] == 0.0
    assert metrics["train/optimizer_steps"] == 0
    for a, b in zip(before, lrn.model.parameters()):
        torch.testing.assert_close(a, b.detach(), rtol=0, atol=0)
    assert lrn.update(random_trajs(seed=2), PAD)["train/optimizer_steps"] == 1  # signal again: it steps


ULP = 2.0**-23
"""float32's spacing at 1.0: 1 and 1 + ULP are the same reward summed in another order, rounded to float32."""


def flat_up_to_rounding(seed: int = 1) -> list[Trajectory]:
    """`random_trajs`' groups with every reward 1, but one sample per group 1 + ULP."""
    return [
        dataclasses.replace(t, reward=1.0 + ULP * (i % 4 == 3)) for i, t in enumerate(random_trajs(seed=seed))
    ]


@pytest.mark.parametrize("advantage", ["grpo", "drgrpo", "rloo", "reinforce++_baseline"])
def test_groups_flat_up_to_rounding_get_advantage_zero(advantage):
    """A one-ulp spread is rounding, not evidence: every group estimator gives such a group exactly 0.
    Before, the std division blew 1.2e-7 up to 1.5 (adv_eps 0; 0.084 with verl's 1e-6), REINFORCE++'s
    whitening over a batch of such groups likewise, and the others kept ±1e-7 (a step on AdamW's moments)."""
    batch = learner(advantage=advantage, adv_eps=0.0).prepare_batch(flat_up_to_rounding(), PAD)
    assert torch.count_nonzero(batch.advantages) == 0
    real = [dataclasses.replace(t, reward=1.0 + 1e-4 * (i % 4 == 3)) for i, t in enumerate(random_trajs())]
    assert torch.count_nonzero(learner(advantage=advantage).prepare_batch(real, PAD).advantages) > 0


def test_a_batch_flat_up_to_rounding_takes_no_step():
    lrn = learner(lr=1e-3)
    lrn.update(random_trajs(), PAD)  # AdamW's moments, which a step on no signal would follow
    before = [p.detach().clone() for p in lrn.model.parameters()]
    metrics = lrn.update(flat_up_to_rounding(), PAD)
    assert metrics["train/optimizer_steps"] == 0 and lrn.sample_advantages == [0.0] * 8
    for a, b in zip(before, lrn.model.parameters()):
        torch.testing.assert_close(a, b.detach(), rtol=0, atol=0)


def test_a_mini_batch_whose_gradient_clipping_zeroes_still_steps(monkeypatch):
    """Signal, but every token on the clipped side of its ratio (GSPO's 3e-4 band does this to whole
    mini-batches once π_θ has moved): the gradient is exactly 0, and the step is taken, as verl, TRL and
    CleanRL take it (AdamW moves along its moments). Only a mini-batch without signal skips its step."""
    lrn = learner(lr=1e-3, ppo_epochs=2)
    lrn.update(random_trajs(), PAD)
    prepare = lrn.prepare_batch

    def far_from_old(*args, **kwargs):  # ratio e^5 where Â > 0, e^-5 where Â < 0: both clipped
        batch = prepare(*args, **kwargs)
        batch.old_logprobs -= 5.0 * torch.sign(batch.advantages)
        return batch

    monkeypatch.setattr(lrn, "prepare_batch", far_from_old)
    before = [p.detach().clone() for p in lrn.model.parameters()]
    metrics = lrn.update(random_trajs(seed=2), PAD)
    assert metrics["train/grad_norm"] == 0.0 and metrics["train/clip_frac"] > 0.9
    assert metrics["train/optimizer_steps"] == 2
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, lrn.model.parameters()))


def test_grad_norm_is_the_mean_over_the_steps_taken():
    """Two mini-batches, the first one flat (no step): `train/grad_norm` is the other one's, not halved."""
    trajs = random_trajs()  # groups 0 and 1
    one_flat = [dataclasses.replace(t, reward=1.0) if t.group == 0 else t for t in trajs]
    metrics = learner(lr=1e-3, num_minibatches=2, shuffle=False).update(one_flat, PAD)
    alone = learner(lr=1e-3).update([t for t in trajs if t.group == 1], PAD)
    assert metrics["train/optimizer_steps"] == 1 and alone["train/grad_norm"] > 0
    assert metrics["train/grad_norm"] == pytest.approx(alone["train/grad_norm"], rel=1e-5)


def test_the_kl_reference_runs_on_pi_olds_path():
    """At θ = θ_ref the KL is 0 to the bit only when π_ref takes the rows as π_old and the training forward
    do (the first epoch's mini-batches, the same micro-batches): on another partition float32 differs by
    ~2e-7 per token here, a KL gradient on a batch of flat groups."""
    model = tiny_model()
    cfg = LearnerConfig(kl_coef=0.1, num_minibatches=2, micro_batch_size=3, lr=1e-3)
    lrn = Learner(model, cfg, Accelerator(cpu=True), ref_model=copy.deepcopy(model))
    metrics = lrn.update([dataclasses.replace(t, reward=1.0) for t in random_trajs(16, seed=3)], PAD)
    assert metrics["train/kl_ref"] == 0.0 and metrics["train/grad_norm"] == 0.0
    assert metrics["train/optimizer_steps"] == 2  # the KL term is signal: a step, here on a zero gradient
