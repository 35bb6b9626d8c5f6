"""Shared by the backend tests: the meaning every sampler's log-probs must have, computed by hand, and the
backend's own record of what it sampled, which agent-program trajectories must equal token for token."""

from __future__ import annotations

import pytest
import torch


def nucleus_logprobs(
    model, prompt: list[int], completion: list[int], temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """log μ of each completion token, μ = softmax(logits / T) on the top-p nucleus, renormalised; (T,) twice.

    Returns (log μ, inside) where `inside` says whether the token is in its nucleus. The nucleus is
    every token whose strictly more probable tokens hold less than `top_p` of the mass, written out
    here independently of transformers' and vLLM's own implementations.
    """
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].double() / temperature  # (T, V)
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


def _record_generations(policy) -> list[tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]]:
    """The backend's own record: every (prompt, sampled ids, log-probs) its `generate` produced."""
    log, real = [], policy.generate

    def generate(prompts, sampling, seed=None, **kwargs):
        out = real(prompts, sampling, seed=seed, **kwargs)
        log.extend((tuple(p), tuple(c.token_ids), tuple(c.logprobs)) for p, c in zip(prompts, out))
        return out

    policy.generate = generate
    return log


def _assert_exact(trajectories, log) -> None:
    """Each run of mask-1 tokens is a completion the backend sampled, fed exactly the ids before it."""
    sampled = {(p, c): lp for p, c, lp in log}
    runs = 0
    for t in trajectories:
        assert len(t.token_ids) == len(t.loss_mask) == len(t.sampler_logprobs)
        i, ends = 0, []
        while i < len(t.loss_mask):
            if not t.loss_mask[i]:
                assert t.sampler_logprobs[i] == 0.0
                i += 1
                continue
            j = i
            while j < len(t.loss_mask) and t.loss_mask[j]:
                j += 1
            key = (tuple(t.token_ids[:i]), tuple(t.token_ids[i:j]))
            assert key in sampled, "a mask-1 run that the backend never sampled from that exact prompt"
            assert t.sampler_logprobs[i:j] == list(sampled[key])
            ends.append(j - 1)
            runs, i = runs + 1, j
        assert ends == t.turn_ends
    assert runs == len(log), "every sampled completion is in exactly one trajectory"


@pytest.fixture
def record_generations():
    """Wraps a policy's `generate` to keep the backend's own record of what it sampled (a list it returns)."""
    return _record_generations


@pytest.fixture
def assert_exact():
    """Checks that trajectories' mask-1 runs are exactly the completions in a `record_generations` log."""
    return _assert_exact
