"""argym's env wrappers: `DecomposeReasoner` (verified Decomposer-Reasoner mode, dense checkable rewards)."""

from argym.envs.wrappers.checkable import NotCheckable, SubQuestion, check_subquestion, safe_eval
from argym.envs.wrappers.decompose import DecomposeReasoner, make_decompose_reasoner

__all__ = [
    "DecomposeReasoner",
    "NotCheckable",
    "SubQuestion",
    "check_subquestion",
    "make_decompose_reasoner",
    "safe_eval",
]
