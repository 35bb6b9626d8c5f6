"""Shared by the backend tests: the meaning every sampler's log-probs must have, computed by hand."""

from __future__ import annotations

import pytest
import torch


def nucleus_logprobs(model, prompt: list[int], completion: list[int], temperature: float,
                     top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """log μ of each completion token, μ = softmax(logits / T) on the top-p nucleus, renormalised; (T,) twice.

    Returns (log μ, inside) where `inside` says whether the token is in its nucleus. The nucleus is
    every token whose strictly more probable tokens hold less than `top_p` of the mass, written out
    here independently of transformers' and vLLM's own implementations.
    """
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1:-1].double() / temperature  # (T, V)
    probs = torch.softmax(logits, dim=-1)
    ordered, order = probs.sort(dim=-1, descending=True)
    before = ordered.cumsum(dim=-1) - ordered  # mass of the tokens ranked above each one
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < top_p)  # (T, V)
    mass = (probs * keep).sum(dim=-1)  # (T,)
    target = torch.tensor(completion)[:, None]
    p = probs.gather(-1, target)[:, 0]
    return (p.log() - mass.log()).float(), keep.gather(-1, target)[:, 0]


@pytest.fixture
def sampled_logprobs_reference():
    """`nucleus_logprobs`: the reference every backend's `Completion.logprobs` is checked against."""
    return nucleus_logprobs
