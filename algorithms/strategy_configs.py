"""The recipe's sections of the rollout strategies that add their own settings (`r3l`, `decomposer`).

Plain dataclasses apart from the strategies (algorithms/r3l/retry.py, algorithms/decomposer.py), so that
reading a recipe (algorithms/config.py) imports no rollout engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from argym.errors import ConfigError


@dataclass
class R3LConfig:
    """R³L's rollout side (the credit rule is `algorithm.amplify_alpha`, the off-policy weight `algorithm.tis_cap`)."""

    reflector: str = "rule"
    """`rule` (pivot and guidance from the env's verdicts) or `policy` (the policy writes a JSON reflection)."""
    retry_fraction: float = 0.5
    """Share of each group spent on retries (the paper: half); the rest are ordinary rollouts."""
    guidance_role: str = "user"
    """Role of the inserted guidance message (the paper uses a system message; some templates
    only render a system message first, so `user` is the portable default)."""
    reflection_max_tokens: int = 256
    """Token budget of one reflection (`reflector: policy`)."""
    train_reflections: bool = False
    """Also train on the reflections, rewarded 1 when the retry improved on the original (paper §3)."""
    train_failed_original: bool = True
    """Keep a retried failure in the batch, masked before its pivot (the paper's `_adjust_action_mask_for_retry`);
    False leaves it out."""

    def __post_init__(self) -> None:
        if self.reflector not in ("rule", "policy"):
            raise ConfigError(f"r3l.reflector must be 'rule' or 'policy', got {self.reflector!r}.")
        if not 0 < self.retry_fraction < 1:
            raise ConfigError(
                f"r3l.retry_fraction must be in (0, 1), got {self.retry_fraction}; the paper uses 0.5."
            )
        if self.guidance_role not in ("user", "system"):
            raise ConfigError(f"r3l.guidance_role must be 'user' or 'system', got {self.guidance_role!r}.")
        if self.reflection_max_tokens < 8:
            raise ConfigError(f"r3l.reflection_max_tokens must be >= 8, got {self.reflection_max_tokens}.")


@dataclass
class DecomposerConfig:
    """Utility mode (`rollout.strategy: decomposer`); verified mode is the env `argym/DecomposeReasoner-v0`."""

    hint_sets: int = 2
    """Hint lists the decomposer writes per task (its GRPO group)."""
    hint_samples: int = 4
    """Reasoner rollouts per hint list; the utility is their success rate minus the unhinted one."""
    adaptive: bool = True
    """A²D's adaptive trigger: write hints only for tasks the reasoner did not always solve."""
    max_hint_tokens: int = 64
    """Token budget of one hint list."""
    distill: bool = True
    """Train the reasoner on hint-guided successes with the hints removed (A²D's IDL)."""

    def __post_init__(self) -> None:
        for name in ("hint_sets", "hint_samples", "max_hint_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"decomposer.{name} must be >= 1, got {getattr(self, name)}.")
