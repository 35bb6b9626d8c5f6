"""The math env family: `argym/Math-v0`, its task sources and its verifier."""

from argym.envs.math.arithmetic import arithmetic_source
from argym.envs.math.env import MathEnv, math_tasks
from argym.envs.math.verifier import MathVerifier, Verdict, extract_answer, verify_answer

__all__ = [
    "MathEnv",
    "MathVerifier",
    "Verdict",
    "arithmetic_source",
    "extract_answer",
    "math_tasks",
    "verify_answer",
]
