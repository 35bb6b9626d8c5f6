"""Parity with TRL's `GRPOTrainer.compute_loss` on identical inputs: loss and gradients to 1e-5.

Same tiny model (two copies of one init), same prompts, completions, masks,
advantages and old log-probs, for TRL's loss types grpo, dr_grpo, dapo and
importance_sampling_level="sequence" (GSPO), with and without a k3 KL term.
TRL's internals are private, so the version is pinned (the `trl` extra);
What calling TRL's loss directly needs (bf16 off, one model copy per trainer,
β set after construction, old log-probs 0 on padding) is set in `trl_loss`.

Deliberate differences, each checked below:
- TRL (use_bias_correction_kl=True, its default) multiplies the k3 term by the
  ratio π_θ/π_old (DeepSeek-V3.2); argym uses GRPO's plain k3 (arXiv 2402.03300 eq. 4),
  so argym matches TRL with use_bias_correction_kl=False, and with it on the
  losses differ by exactly β·agg(k3·(ρ − 1)).
- Prompts here have equal lengths: TRL left-pads prompts and transformers 5
  does not derive position ids from the attention mask, so a padded prompt
  shifts positions in TRL but not in argym (right padding).
"""

from __future__ import annotations

import copy

import pytest
import torch
import trl  # pinned in the dev extra; a missing or other trl must fail, not skip
from accelerate import Accelerator

from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
from argym.algorithms.learner import Learner, LearnerConfig
from argym.types import Trajectory

TRL_VERSION = "1.16.0"
MAX_COMPLETION = 7
PROMPT_LEN = 5
LENGTHS = [7, 3, 1, 5, 7, 2]  # completion lengths (policy tokens): a length-1 response included
ADV = torch.tensor([0.9, -0.4, 1.3, -1.1, 0.0, 0.6])


def test_trl_is_the_pinned_version():
    """The parity tests use TRL's private internals; they are only meaningful on the pinned release."""
    assert trl.__version__ == TRL_VERSION


def _setup():
    tok = build_tiny_tokenizer()
    model = build_tiny_model(
        tok,
        TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=64),
        seed=3,
    )
    g = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prompts = torch.randint(4, vocab, (len(LENGTHS), PROMPT_LEN), generator=g)  # (B, P)
    comps = torch.randint(4, vocab, (len(LENGTHS), MAX_COMPLETION), generator=g)  # (B, T)
    cmask = (torch.arange(MAX_COMPLETION)[None] < torch.tensor(LENGTHS)[:, None]).long()  # (B, T)
    comps = torch.where(cmask > 0, comps, torch.full_like(comps, tok.pad_token_id))
    noise = 0.3 * torch.randn(len(LENGTHS), MAX_COMPLETION, generator=g)  # old log-probs ≠ current
    return tok, model, prompts, comps, cmask, noise


def _current_logps(model, prompts, comps):
    with torch.no_grad():
        logits = model(input_ids=torch.cat([prompts, comps], 1)).logits[:, PROMPT_LEN - 1 : -1].float()
    return torch.log_softmax(logits, -1).gather(-1, comps[..., None]).squeeze(-1)  # (B, T)


def trl_loss(
    model,
    tok,
    prompts,
    comps,
    cmask,
    old,
    ref,
    *,
    loss_type,
    level="token",
    eps=(0.2, 0.2),
    beta=0.0,
    bias_kl=False,
):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir="/tmp/argym-trl-parity",
        bf16=False,
        use_cpu=True,
        report_to=[],
        per_device_train_batch_size=len(LENGTHS),
        num_generations=len(LENGTHS),
        max_completion_length=MAX_COMPLETION,
        beta=0.0,
        loss_type=loss_type,
        importance_sampling_level=level,
        epsilon=eps[0],
        epsilon_high=eps[1],
        use_bias_correction_kl=bias_kl,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["x"] * len(LENGTHS)}),
        processing_class=tok,
    )
    trainer.beta = beta  # set after construction, so TRL does not try to load a reference model by name
    trainer.current_gradient_accumulation_steps = 1
    inputs = {
        "prompt_ids": prompts,
        "prompt_mask": torch.ones_like(prompts),
        "completion_ids": comps,
        "completion_mask": cmask,
        "advantages": ADV.clone(),
        "old_per_token_logps": old * cmask,  # 0 on padding, not -inf
        "num_items_in_batch": cmask.sum(),
    }
    if beta:
        inputs["ref_per_token_logps"] = ref * cmask
    trainer.model.train()
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in trainer.model.named_parameters()}


def argym_loss(model, tok, prompts, comps, cmask, old, ref, cfg: LearnerConfig):
    trajs = []
    for i, n in enumerate(LENGTHS):
        trajs.append(
            Trajectory(
                task_id=f"t{i}",
                messages=[],
                reward=0.0,
                success=False,
                turns=1,
                terminated=True,
                truncated=False,
                token_ids=prompts[i].tolist() + comps[i, :n].tolist(),
                loss_mask=[0] * PROMPT_LEN + [1] * n,
                group=0,
            )
        )
    learner = Learner(
        model, cfg, Accelerator(cpu=True), ref_model=copy.deepcopy(model) if cfg.kl_coef else None
    )
    batch = learner.prepare_batch(trajs, tok.pad_token_id, advantages=ADV.clone())
    width = batch.loss_mask.shape[1]  # target-aligned: column P − 1 + j holds completion token j

    def place(x):
        out = torch.zeros(len(LENGTHS), width)
        out[:, PROMPT_LEN - 1 :] = x[:, : width - PROMPT_LEN + 1]
        return out * batch.loss_mask

    batch.old_logprobs = place(old)
    if cfg.kl_coef:
        batch.ref_logprobs = place(ref)
    sums, _ = learner.backward(batch)
    return sums["loss"].item(), {n: p.grad.clone() for n, p in learner.model.named_parameters()}


CASES = {
    # TRL loss_type / level / ε  ↔  argym parts
    "grpo": (dict(loss_type="grpo"), dict(loss_agg="seq-mean-token-mean")),
    "dr_grpo": (
        dict(loss_type="dr_grpo"),
        dict(loss_agg="seq-mean-token-sum-norm", loss_agg_constant=float(MAX_COMPLETION)),
    ),
    "dapo": (dict(loss_type="dapo", eps=(0.2, 0.28)), dict(loss_agg="token-mean", clip_high=0.28)),
    "gspo": (
        dict(loss_type="grpo", level="sequence", eps=(0.03, 0.04)),
        dict(policy_loss="gspo", loss_agg="seq-mean-token-mean", clip_low=0.03, clip_high=0.04),
    ),
    "grpo_kl": (dict(loss_type="grpo", beta=0.04), dict(loss_agg="seq-mean-token-mean", kl_coef=0.04)),
    "dapo_kl": (dict(loss_type="dapo", beta=0.04), dict(loss_agg="token-mean", kl_coef=0.04)),
}


FAST = ("grpo", "gspo")  # the rest (~5 s each: a TRL trainer per case) run with the slow tests


@pytest.mark.parametrize(
    "case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow) for c in sorted(CASES)]
)
def test_loss_and_gradients_match_trl(case):
    trl_kw, argym_kw = CASES[case]
    tok, model, prompts, comps, cmask, noise = _setup()
    cur = _current_logps(model, prompts, comps)
    old, ref = cur + noise, cur - noise.flip(0)
    l_trl, g_trl = trl_loss(copy.deepcopy(model), tok, prompts, comps, cmask, old, ref, **trl_kw)
    l_arg, g_arg = argym_loss(
        copy.deepcopy(model),
        tok,
        prompts,
        comps,
        cmask,
        old,
        ref,
        LearnerConfig(micro_batch_size=4, max_grad_norm=None, **argym_kw),
    )
    assert l_arg == pytest.approx(l_trl, abs=1e-5, rel=1e-5)
    assert g_trl.keys() == g_arg.keys()
    for name in g_trl:
        torch.testing.assert_close(g_arg[name], g_trl[name], atol=1e-5, rtol=1e-5, msg=name)
    # the inputs really exercise clipping (the ratio is not 1)
    assert (old - cur).abs().max() > 0.2


@pytest.mark.slow
def test_trl_bias_corrected_kl_is_a_deliberate_difference():
    tok, model, prompts, comps, cmask, noise = _setup()
    cur = _current_logps(model, prompts, comps)
    old, ref = cur + noise, cur - noise.flip(0)
    beta = 0.5
    l_trl, _ = trl_loss(
        copy.deepcopy(model), tok, prompts, comps, cmask, old, ref, loss_type="dapo", beta=beta, bias_kl=True
    )
    l_arg, _ = argym_loss(
        copy.deepcopy(model),
        tok,
        prompts,
        comps,
        cmask,
        old,
        ref,
        LearnerConfig(loss_agg="token-mean", kl_coef=beta),
    )
    k3 = torch.exp(ref - cur) - (ref - cur) - 1  # (B, T)
    ratio = torch.exp(cur - old)
    extra = beta * ((k3 * (ratio - 1)) * cmask).sum() / cmask.sum()  # TRL's k3·ρ minus argym's k3
    assert abs(extra.item()) > 1e-4  # the difference is real on these inputs ...
    assert l_trl - l_arg == pytest.approx(extra.item(), abs=1e-6)  # ... and exactly this
