"""Credit assignment for step (process) rewards: PURE's min-form and the sum-form it replaces.

Cheng et al. 2025, "Stop Summation: Min-Form Credit Assignment Is All Process
Reward Model Needs for Reasoning" (arXiv 2504.15275). With a sum of step
rewards a policy can raise its return by adding steps a reward model likes
(padding); taking the return as the *minimum* future step reward removes that
incentive. The paper's soft form weights each step by softmax(−r/T) over all
steps of the response, so the weighted sum tends to min_j r_j as T → 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def min_form_weights(step_rewards: Sequence[float], temperature: float = 0.1) -> list[float]:
    """w_j = softmax_j(−r_j / T) over all steps of one response (PURE eq. for r*_j = w_j · r_j)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if not step_rewards:
        return []
    logits = [-r / temperature for r in step_rewards]
    top = max(logits)  # subtract the max so exp never overflows
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def min_form_rewards(step_rewards: Sequence[float], temperature: float = 0.1) -> list[float]:
    """Transformed step rewards r*_j = softmax_j(−r/T) · r_j; their sum approaches min_j r_j."""
    weights = min_form_weights(step_rewards, temperature)
    return [w * r for w, r in zip(weights, step_rewards)]


def min_form_returns(
    step_rewards: Sequence[float], temperature: float = 0.1, strict: bool = False
) -> list[float]:
    """Per-step returns under min-form credit.

    Soft (default): G_j = Σ_{k ≥ j} r*_k, the reverse cumulative sum of the
    transformed rewards (γ = 1), as PURE computes it — only G_0 approximates the
    min of all steps; later returns are partial weighted sums. `strict`:
    G_j = min(r_j, G_{j+1}), the exact minimum of the future step rewards (PURE's
    'strict min-form' option).
    """
    if strict:
        out: list[float] = []
        running = math.inf
        for r in reversed(step_rewards):
            running = min(running, float(r))
            out.append(running)
        return out[::-1]
    return _reverse_cumsum(min_form_rewards(step_rewards, temperature), gamma=1.0)


def sum_form_returns(step_rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """The usual γ-discounted return G_j = Σ_{k ≥ j} γ^{k−j} r_k (kept for comparison with min-form)."""
    return _reverse_cumsum([float(r) for r in step_rewards], gamma)


def _reverse_cumsum(values: Sequence[float], gamma: float) -> list[float]:
    out: list[float] = []
    acc = 0.0
    for v in reversed(values):
        acc = v + gamma * acc
        out.append(acc)
    return out[::-1]


def strict_min_form_rewards(step_rewards: Sequence[float]) -> list[float]:
    """Step rewards whose reverse cumulative sum is the strict min-form return.

    r'_j = G_j − G_{j+1} with G_j = min_{k ≥ j} r_k and G_n = 0, so any learner
    that sums rewards from the end (`returns` advantage, γ = 1) recovers PURE's
    'strict min-form' returns exactly, and the whole response's sum is min_j r_j.
    """
    returns = min_form_returns(step_rewards, strict=True)
    return [g - (returns[j + 1] if j + 1 < len(returns) else 0.0) for j, g in enumerate(returns)]


def credit_rewards(
    step_rewards: Sequence[float | None], credit: str = "min", temperature: float = 0.1
) -> list[float]:
    """Per-step rewards to place on each step's last token, by credit rule.

    "min": PURE's soft min-form r*_j (sum → min as T → 0); "strict": rewards
    whose reverse sum is the strict min of the future; "sum": the raw rewards
    (γ-discounted by the learner's `gamma`, if below 1), the sum-form PURE argues against.

    A step scored None is one the PRM has no opinion on (a rule PRM's step
    without a verdict): it gets 0 and takes no part in the minimum, so its
    return is that of the next scored step. Scoring such steps 0 instead would
    cap the min-form return of every correct answer with more than one step at
    0, so the policy would learn to write single-step answers (PURE, arXiv
    2504.15275, saw that hack with its per-step baseline).
    """
    if credit not in ("min", "strict", "sum"):
        raise ValueError(f"credit must be 'min', 'strict' or 'sum', got {credit!r}.")
    scored = [j for j, r in enumerate(step_rewards) if r is not None]
    values = [float(step_rewards[j]) for j in scored]  # type: ignore[arg-type]
    if credit == "min":
        values = min_form_rewards(values, temperature)
    elif credit == "strict":
        values = strict_min_form_rewards(values)
    out = [0.0] * len(step_rewards)
    for j, v in zip(scored, values):
        out[j] = v
    return out


def token_loo_baseline(
    step_rewards: Sequence[Sequence[float]], step_tokens: Sequence[Sequence[int]]
) -> list[list[float]]:
    """PURE's per-token leave-one-out baseline over one group of responses to the same prompt.

    For step j of response i, subtract (mean reward per token of the *other*
    responses) × (tokens in step j) (PURE, arXiv 2504.15275, OpenRLHF branch
    `reward_baseline=token`; the per-step average was dropped because it
    favours responses with fewer steps). A response's reward per token is its
    summed step rewards over its token count. A group of one has no other
    response and is returned unchanged.
    """
    if len(step_rewards) != len(step_tokens):
        raise ValueError(
            f"{len(step_rewards)} responses of step rewards but {len(step_tokens)} of token counts."
        )
    per_token = []
    for i, (rs, ns) in enumerate(zip(step_rewards, step_tokens)):
        if len(rs) != len(ns):
            raise ValueError(f"response {i}: {len(rs)} step rewards for {len(ns)} step token counts.")
        per_token.append(sum(rs) / max(sum(ns), 1))
    k = len(step_rewards)
    if k < 2:
        return [[float(r) for r in rs] for rs in step_rewards]
    total = sum(per_token)
    out = []
    for rs, ns, own in zip(step_rewards, step_tokens, per_token):
        others = (total - own) / (k - 1)
        out.append([float(r) - others * n for r, n in zip(rs, ns)])
    return out
