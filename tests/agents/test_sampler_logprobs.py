"""What a sampler's log-probs mean (`Completion.logprobs`): the distribution the token was drawn from.

Checked for transformers here and for vLLM in test_vllm.py, against the same hand-written
reference (conftest.py: softmax(logits / T) on the top-p nucleus, renormalised).
"""

from __future__ import annotations

import torch

from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer

QUESTIONS = ["What is 2+3?", "Say hi.", "Add 10 and 32, then box the result."]


def test_hf_log_probs_are_those_of_the_top_p_nucleus_sampled_from(sampled_logprobs_reference):
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=3), tok, name="tiny")
    prompts = [policy.renderer.prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]
    shift = []
    for temperature, top_p in ((0.7, 0.5), (1.3, 0.9), (0.7, 1.0)):
        outs = policy.generate(
            prompts, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=12), seed=5
        )
        for prompt, c in zip(prompts, outs):
            want, inside = sampled_logprobs_reference(policy.model, prompt, c.token_ids, temperature, top_p)
            assert inside.all()  # every sampled token lies in its nucleus
            assert (torch.tensor(c.logprobs) - want).abs().max() < 1e-4, (temperature, top_p)
            full, _ = sampled_logprobs_reference(policy.model, prompt, c.token_ids, temperature, 1.0)
            shift.append(float((want - full).max()) if top_p < 1 else 0.0)
    assert max(shift) > 0.1  # top-p changes the numbers: the check can tell the two meanings apart
    greedy = policy.generate(prompts[:1], SamplingParams(temperature=0, max_new_tokens=6))[0]
    want, _ = sampled_logprobs_reference(policy.model, prompts[0], greedy.token_ids, 1.0, 1.0)
    assert (torch.tensor(greedy.logprobs) - want).abs().max() < 1e-4  # greedy: log π at T = 1


def test_repeated_prompts_are_prefilled_once_and_sampled_as_without_sharing(sampled_logprobs_reference):
    """A GRPO chunk repeats each prompt group_size times: the prompts' KV is computed once per distinct
    prompt (of different lengths, so under left padding) and copied; the draws and their log-probs are
    those of the unshared path and of the reference."""
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=3), tok, name="tiny")
    distinct = [policy.renderer.prompt_ids([{"role": "user", "content": q}]) for q in QUESTIONS]
    prompts = [p for p in distinct for _ in range(4)]
    batches: list[int] = []
    hook = policy.model.register_forward_pre_hook(
        lambda _m, args, kwargs: batches.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    sampling = SamplingParams(temperature=1.0, top_p=0.9, max_new_tokens=10)
    try:
        shared = policy.generate(prompts, sampling, seed=11)
        first = batches[0]
        policy.shared_prefill = False
        plain = policy.generate(prompts, sampling, seed=11)
    finally:
        hook.remove()
    assert first == len(distinct)  # the prefill ran on the distinct prompts alone
    assert [c.token_ids for c in shared] == [c.token_ids for c in plain]
    assert len({tuple(c.token_ids) for c in shared}) > len(distinct)  # the copies were sampled apart
    for prompt, s, p in zip(prompts, shared, plain):
        assert (torch.tensor(s.logprobs) - torch.tensor(p.logprobs)).abs().max() < 1e-4
        want, _ = sampled_logprobs_reference(policy.model, prompt, s.token_ids, 1.0, 0.9)
        assert (torch.tensor(s.logprobs) - want).abs().max() < 1e-4
