"""Statistics for evaluation scores: pass@k and confidence intervals.

Pure functions on plain numbers (numpy and the standard library only), so the
CLI, the trainer's periodic evaluation and the leaderboards all report the
same thing.

- `pass_at_k`: the unbiased pass@k estimator of Chen et al. 2021
  ("Evaluating Large Language Models Trained on Code", arXiv 2107.03374, §2.1).
- `success_interval`: a confidence interval for a success rate. With one
  sample per task the episodes are independent Bernoulli draws and the Wilson
  score interval is used (Wilson 1927; it stays inside [0, 1] and behaves at
  rates near 0 or 1, unlike the Wald interval). With several samples per task
  the samples of one task are correlated, so the interval is clustered by
  task (docs/design.md, Evaluation): a cluster-robust standard error of the mean
  with a normal approximation, clipped to [0, 1]; when that collapses to a point
  (every task has the same success rate), Wilson over the tasks instead.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import NormalDist

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from `n` samples of which `c` succeeded.

    pass@k = 1 - C(n-c, k) / C(n, k)   (arXiv 2107.03374, eq. 1)

    computed as the product 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms
    the (huge) binomial coefficients. Requires 0 <= c <= n and 1 <= k <= n.

    >>> round(pass_at_k(10, 3, 1), 6)  # = c/n for k=1
    0.3
    """
    n, c, k = int(n), int(c), int(k)
    if n < 1:
        raise ValueError(f"pass_at_k needs at least one sample, got n={n}.")
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got c={c}, n={n}.")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got k={k}, n={n}; draw at least k samples per task.")
    if n - c < k:  # every k-subset holds a success
        return 1.0
    # 1 - C(n-c, k)/C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i)   (Chen et al. 2021, fig. 3)
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def z_value(confidence: float) -> float:
    """The two-sided standard normal quantile for `confidence` (1.96 for 0.95)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}.")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for `successes` out of `n` independent trials.

    center = (p + z²/2n) / (1 + z²/n),  half = z/(1 + z²/n) · sqrt(p(1-p)/n + z²/4n²).
    """
    if n < 1:
        raise ValueError(f"wilson_interval needs n >= 1, got {n}.")
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n, got {successes} of {n}.")
    return _wilson(successes / n, n, confidence)


def _wilson(p: float, n: int, confidence: float) -> tuple[float, float]:
    """The Wilson interval of a rate `p` observed over `n` units (p need not be a whole count over n)."""
    z = z_value(confidence)
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low = 0.0 if p <= 0.0 else max(0.0, center - half)
    high = 1.0 if p >= 1.0 else min(1.0, center + half)
    return low, high


def success_interval(
    successes: Sequence[bool | float], task_ids: Sequence[Hashable], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The success rate over episodes and its confidence interval: ``(mean, low, high)``.

    `successes[i]` is episode i's outcome (bool, or a value in [0, 1]) and
    `task_ids[i]` its task. `mean` is the success rate over all episodes.

    - Every task sampled once: the Wilson score interval (`wilson_interval`).
      A single task sampled several times is the same case (its samples are
      independent draws of that task's success probability).
    - Some task sampled more than once: the samples of a task are correlated,
      so treating them as independent would make the interval too narrow.
      The interval is clustered by task: the cluster-robust (sandwich)
      variance of the mean,
          Var = G/(G-1) · Σ_g (Σ_{i∈g} (y_i - ȳ))² / N²,
      over G tasks and N episodes, with a normal approximation, clipped to
      [0, 1]. When every task has the same number of samples this is exactly
      the squared standard error of the mean of the per-task success rates
      (sample variance over tasks / G).
    - The clustered interval would collapse to a point (every task has the same
      success rate, e.g. an oracle at 1.0: zero variance), claiming certainty
      the data cannot give. Then the Wilson interval over the G tasks is used
      instead, the task's rate as its outcome: G tasks, not N correlated
      episodes, are the independent units.
    """
    y = np.asarray(successes, dtype=float)  # (N,)
    if y.ndim != 1 or len(y) != len(task_ids):
        raise ValueError(
            f"success_interval needs one task id per episode, got {len(y)} outcomes "
            f"and {len(task_ids)} task ids."
        )
    if len(y) == 0:
        raise ValueError("success_interval needs at least one episode.")
    if np.any((y < 0) | (y > 1)):
        raise ValueError("success_interval needs outcomes in [0, 1].")
    mean = float(y.mean())
    groups: dict[Hashable, list[int]] = {}
    for i, t in enumerate(task_ids):
        groups.setdefault(t, []).append(i)
    n, g = len(y), len(groups)
    if g == n or g == 1:
        if np.all((y == 0) | (y == 1)):
            low, high = wilson_interval(int(y.sum()), n, confidence)
            return mean, low, high
        return _normal_interval(mean, float(y.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0, confidence)
    # cluster-robust variance of the mean: per-task sums of residuals   # (G,)
    resid = np.array([float(np.sum(y[idx] - mean)) for idx in groups.values()])
    var = g / (g - 1) * float(np.sum(resid**2)) / (n * n)
    if var == 0.0:  # a point interval: fall back to Wilson over the tasks (see above)
        return (mean, *_wilson(mean, g, confidence))
    return _normal_interval(mean, math.sqrt(var), confidence)


def _normal_interval(mean: float, se: float, confidence: float) -> tuple[float, float, float]:
    z = z_value(confidence)
    return mean, max(0.0, mean - z * se), min(1.0, mean + z * se)


def within_group_correlation(
    xs: Sequence[float], ys: Sequence[float], groups: Sequence[Hashable]
) -> float | None:
    """Pearson correlation of `xs` and `ys` after subtracting each group's mean from both.

    A group-normalised advantage (GRPO and kin, arXiv 2402.03300 §4.1.2) only sees how the
    samples of one prompt differ, so a shaping term helps the outcome exactly as far as its
    differences *within* a group agree with the outcome's: this is that agreement. None when
    either has no within-group variation (nothing to correlate).
    """
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if not len(x) == len(y) == len(groups):
        raise ValueError(
            f"within_group_correlation needs equal lengths, got {len(x)}, {len(y)}, {len(groups)}."
        )
    index: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        index.setdefault(g, []).append(i)
    for idx in index.values():
        x[idx] -= x[idx].mean()
        y[idx] -= y[idx].mean()
    sx, sy = float(np.sqrt(np.sum(x * x))), float(np.sqrt(np.sum(y * y)))
    if sx < 1e-12 or sy < 1e-12:
        return None
    return float(np.sum(x * y) / (sx * sy))
