"""How a math answer is asked for and written: the instruction to box it, and the ``$...$`` a gold answer
may come in (stripped before two answers are compared). Shared by the task sources and the verifier."""

from __future__ import annotations

BOXED_INSTRUCTION = "Put the final answer in \\boxed{}."


def strip_math_delimiters(s: str) -> str:
    """``$\\dfrac{1}{2}$`` -> ``\\dfrac{1}{2}``: gold answers often come in ``$...$``."""
    s = s.strip()
    while len(s) >= 2 and s[0] == s[-1] == "$":
        s = s[1:-1].strip()
    return s
