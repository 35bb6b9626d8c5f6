"""Grading math answers: extract the answer, compare with math-verify.

Two answer formats (`ANSWER_FORMATS`): ``boxed``, the last complete ``\\boxed{}``
(found here, linearly); ``final``, the last mathematical expression of the reply as
math-verify's own `parse` extracts it from unboxed text (its anchors first: "final
answer is", a ``\\boxed{}``, "answer:"; else the rightmost LaTeX or plain
expression or number). A small instruct model rarely boxes, but often ends on its
answer: ``final`` grades what it meant, ``boxed`` grades the format too.

The comparison runs in a `WorkerPool` process with math-verify's own SIGALRM
timeouts on (they need a main thread) under a hard parent-side deadline, and
the answer is capped before parsing (``\\boxed{9^{9^{9^{9}}}}`` alone takes
math-verify's whole 5 s timeout). An answer that makes the verifier time out
is the candidate's failure (scored 0); a worker that crashes is an infrastructure failure (raised).

A task that names its own scorer (``meta["scorer"]``: a reasoning-gym
dataset's ``score_answer``) is scored by it instead, in the same pool under
the same deadline; its score in [0, 1] comes back as the verdict's ``score``.
"""

from __future__ import annotations

import os
import re
from typing import Any, NotRequired, TypedDict

from argym.envs.executors import DeadlineExceeded, WorkerPool, register_pool
from argym.envs.math.answer import strip_math_delimiters
from argym.errors import InfrastructureError

ANSWER_FORMATS = ("boxed", "final")
GRADE_FN = "argym.envs.math.verifier:grade"
MAX_ANSWER_CHARS = 1000  # longer boxed answers are rejected unparsed
MAX_TEXT_CHARS = 10_000  # only the tail of a response is searched
# The rules argym applies on top of math-verify, in the board key beside math-verify's version (a result
# graded by older rules never meets one graded by these). 2: a number gold takes only a number as
# written (`_stated`); a restated question no longer counts.
RULES_VERSION = "2"

# A \boxed{ opening, an escaped (literal) brace, or a plain brace.
_TOKENS = re.compile(r"\\boxed\s*\{|\\[{}]|[{}]")


class Verdict(TypedDict):
    """Why an answer was scored as it was (`info["verdict"]`)."""

    parsed: str | None  # the last \boxed{} content (final: the extracted expression), or None
    correct: bool
    reason: str  # no_boxed_answer (final: no_answer) | answer_too_long | timeout | verified | mismatch
    score: NotRequired[float]  # a task scored by its own scorer: that score in [0, 1] (1: correct)
    boxed: NotRequired[bool]  # answer_format final only: whether the reply has a complete \boxed{}


def _last_boxed(text: str) -> str | None:
    """Content of the \\boxed{...} that opens last among those whose braces close.

    One left-to-right pass with a brace stack, so adversarial input (thousands
    of unterminated ``\\boxed{``) stays linear. Nested boxes give the inner one,
    as verl's `last_boxed_only_string` does.
    """
    stack: list[int | None] = []  # content start for a \boxed{ brace, None for a plain one
    best: tuple[int, int] | None = None
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok.startswith("\\boxed"):
            stack.append(m.end())
        elif tok == "{":
            stack.append(None)
        elif tok == "}" and stack:
            start = stack.pop()
            if start is not None and (best is None or start > best[0]):
                best = (start, m.start())
    return None if best is None else text[best[0] : best[1]].strip()


def extract_answer(text: str) -> str | None:
    """The last complete ``\\boxed{...}`` in `text` (its last 10k chars), or None.

    None also when the answer is longer than `MAX_ANSWER_CHARS`.
    """
    answer = _last_boxed(text[-MAX_TEXT_CHARS:])
    return None if answer is None or len(answer) > MAX_ANSWER_CHARS else answer


PRELOAD = "preload"
"""The `scorer` of the pool's warm-up call: import the dataset scorers' library too, if installed."""


def grade(
    gold: str,
    answer: str,
    timeout_s: int = 5,
    scorer: dict[str, Any] | str | None = None,
    answer_format: str = "boxed",
) -> str | float | tuple[str, str | None]:
    """ "verified", "mismatch", "timeout" or "gold_unparsed": math-verify on gold vs answer.

    Both sides are wrapped in ``\\boxed{}`` so LaTeX parses; gold goes first,
    since `verify` is asymmetric (an interval gold accepts an inequality).
    `timeout_s` bounds each parse/compare via SIGALRM, so this must run in a
    main thread (a pool worker's). A gold answer that does not parse is the
    grader's fault, not the candidate's: "gold_unparsed".

    With `scorer` (a task's ``meta["scorer"]``), the dataset's own score of `answer` instead, a float
    in [0, 1] (`argym.envs.math.reasoning_gym.dataset_score`; it raises if the scorer fails).

    With ``answer_format="final"``, `answer` is the whole reply: math-verify extracts its final
    expression here, in the worker (extraction parses with sympy, so it needs the same bounds),
    and the result is ``(reason, extracted text or None)``; reason "no_answer" when nothing is found.
    """
    if scorer is not None:
        from argym.envs.math import reasoning_gym

        if scorer != PRELOAD:
            return reasoning_gym.dataset_score(scorer, answer)  # type: ignore[arg-type]
        reasoning_gym.preload()
    from math_verify import parse
    from math_verify.errors import TimeoutException

    gold = strip_math_delimiters(gold)
    if answer_format == "final":
        return _grade_final(_parse_gold(gold, timeout_s), answer, timeout_s)
    answer = strip_math_delimiters(answer)
    if gold and "".join(gold.split()) == "".join(answer.split()):
        return "verified"  # the same text: no need to ask sympy
    g = _parse_gold(gold, timeout_s)
    if not g:
        return "gold_unparsed"
    try:
        p = parse(f"\\boxed{{{answer}}}", parsing_timeout=timeout_s, raise_on_error=True)
    except TimeoutException:  # a BaseException subclass in math-verify
        return "timeout"
    except Exception:
        return "mismatch"
    return _compare(g, p, timeout_s)


def _parse_gold(gold: str, timeout_s: int) -> list[Any]:
    """math-verify's parse of the gold answer (boxed, so LaTeX parses), or [] if it does not parse."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    try:
        return parse(f"\\boxed{{{gold}}}", parsing_timeout=timeout_s, raise_on_error=True)
    except (Exception, TimeoutException):
        return []


def _grade_final(gold: list[Any], text: str, timeout_s: int) -> tuple[str, str | None]:
    """`grade` for answer_format final: math-verify's default extraction of `text`, then the comparison."""
    from math_verify import parse
    from math_verify.errors import TimeoutException

    if not gold:
        return "gold_unparsed", None
    try:  # default extraction: LaTeX and plain expressions, the first string match kept as a fallback
        p = parse(text, parsing_timeout=timeout_s, raise_on_error=True)
    except TimeoutException:
        return "timeout", None
    except Exception:
        return "no_answer", None
    if not p:
        return "no_answer", None
    parsed = p[-1] if isinstance(p[-1], str) else str(p[0])
    if len(parsed) > MAX_ANSWER_CHARS:
        return "answer_too_long", None
    return _compare(gold, p, timeout_s), parsed.strip()


# A division as written: a slash, \frac/\dfrac/\tfrac or \div (math-verify evaluates these while parsing).
_DIVISION = re.compile(r"/|\\[dt]?frac|\\div")
# A percentage as written: "50\%", "12.5 %" (math-verify parses it as the unevaluated 50 * 1/100).
_PERCENT = re.compile(r"\s*[+-]?[\d.,{}]+\s*\\?%\s*")
# A fraction in plain text: "2/4" (math-verify leaves it unevaluated, where it evaluates \frac{2}{4}).
_FRACTION = re.compile(r"\s*[+-]?\d+\s*/\s*\d+\s*")


def _stated(gold: list[Any], answer: list[Any]) -> list[Any]:
    """The parses of `answer` that state a value for `gold`: when the gold is a number, the answer must be one.

    math-verify compares values, so ``76 * 66`` equals 5016 and an answer that restates the question's
    expression (``What is 76 * 66?`` answered ``\\boxed{76 * 66}``) would be graded correct: a policy
    learns that copy within a few GRPO steps. So when the gold parses to a number, an answer counts only
    as a number itself (integer, decimal, fraction, percentage, a set of one such), or as an equation
    ending in one (``x = 5016``, ``76 * 66 = 5016``); for an integer gold, not as a fraction or a division, which
    math-verify has already evaluated by the time its result is seen (``84/12`` parses to 7). Answers to
    other golds (expressions, sets, intervals) are compared as before. The text form stays in the list:
    it matches only the same text.
    """
    from sympy import Basic, FiniteSet
    from sympy.core.relational import Relational

    golds = [g for g in gold if isinstance(g, Basic) and g.is_Number]
    if not golds:
        return answer
    integer_gold = any(g.is_Integer for g in golds)
    text = next((a for a in answer if isinstance(a, str)), "")
    kept = []
    for a in answer:
        if not isinstance(a, Basic):
            kept.append(a)
            continue
        value, written = (a.rhs, text.rsplit("=", 1)[-1]) if isinstance(a, Relational) else (a, text)
        if isinstance(value, FiniteSet) and len(value) == 1:  # "{5}": a set of one, compared as its element
            value, written = next(iter(value)), written.strip().removeprefix("{").removesuffix("}")
        if not (value.is_Number or _PERCENT.fullmatch(written) or _FRACTION.fullmatch(written)):
            continue
        if integer_gold and _DIVISION.search(written):
            continue
        kept.append(a)
    return kept


def _compare(gold: list[Any], answer: list[Any], timeout_s: int) -> str:
    """ "verified" if any parsed gold matches any parsed answer stated as its kind of value (`_stated`),
    else "timeout" or "mismatch"."""
    from math_verify import verify
    from math_verify.errors import TimeoutException

    timed_out = False
    stated = _stated(gold, answer)
    for gi in gold:  # pair by pair, so one comparison that fails does not hide the others
        for pj in stated:
            try:
                if verify(gi, pj, timeout_seconds=timeout_s, raise_on_error=True):
                    return "verified"
            except TimeoutException:
                timed_out = True
            except Exception:
                pass
    return "timeout" if timed_out else "mismatch"


def verify_answer(gold: str, answer: str) -> bool:
    """math-verify equivalence of `answer` to `gold`, in this process (main thread only).

    For scripts and tests; envs use `MathVerifier`, which adds a hard deadline.
    """
    return grade(gold, answer) == "verified"


@register_pool("verifier")
def verifier_pool(workers: int | None = None, deadline_s: float = 5.0) -> WorkerPool:
    """A pool running `grade`, warmed up so that imports do not count against the deadline."""
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    return WorkerPool(GRADE_FN, workers=workers, deadline_s=deadline_s, warmup=("1", "1", 1, PRELOAD))


class MathVerifier:
    """Grades a response against a gold answer through a `WorkerPool` running `grade`.

    math-verify's internal per-operation timeout is set below the pool's deadline
    (whole seconds, as SIGALRM takes), so a slow comparison usually ends inside
    the worker without the cost of killing and respawning it.
    """

    def __init__(self, pool: WorkerPool | None = None, deadline_s: float = 5.0):
        self.pool = pool if pool is not None else verifier_pool(deadline_s=deadline_s)
        self.internal_timeout_s = max(1, int(self.pool.deadline_s * 0.6))

    def check(
        self, gold: str, text: str, scorer: dict[str, Any] | None = None, answer_format: str = "boxed"
    ) -> Verdict:
        """Grade `text` (the whole response) against `gold`, or with the task's own `scorer` if it has one
        (then the verdict has a ``score``). Raises `InfrastructureError` if the worker or the scorer failed.

        ``answer_format="final"`` grades the reply's final expression (see the module docstring); the
        verdict then also says whether the reply was ``boxed`` (the `format` reward component reads it).
        """
        if answer_format == "final":
            return self._check_final(gold, text[-MAX_TEXT_CHARS:])
        answer = _last_boxed(text[-MAX_TEXT_CHARS:])
        if answer is None:
            return {"parsed": None, "correct": False, "reason": "no_boxed_answer", **_zero(scorer)}
        if len(answer) > MAX_ANSWER_CHARS:
            return {"parsed": None, "correct": False, "reason": "answer_too_long", **_zero(scorer)}
        if scorer is not None:
            try:
                score = float(self.pool.call(gold, answer, self.internal_timeout_s, scorer))
            except DeadlineExceeded:
                return {"parsed": answer, "correct": False, "reason": "timeout", "score": 0.0}
            return {
                "parsed": answer,
                "correct": score >= 1.0,
                "reason": "verified" if score >= 1.0 else "mismatch",
                "score": score,
            }
        try:
            reason = self.pool.call(gold, answer, self.internal_timeout_s)
        except DeadlineExceeded:
            reason = "timeout"
        if reason == "gold_unparsed":
            raise InfrastructureError(
                f"The gold answer {gold[:200]!r} does not parse with math-verify; fix the task's answer."
            )
        return {"parsed": answer, "correct": reason == "verified", "reason": reason}

    def _check_final(self, gold: str, text: str) -> Verdict:
        boxed = _last_boxed(text) is not None
        try:
            reason, parsed = self.pool.call(gold, text, self.internal_timeout_s, None, "final")
        except DeadlineExceeded:
            reason, parsed = "timeout", None
        if reason == "gold_unparsed":
            raise InfrastructureError(
                f"The gold answer {gold[:200]!r} does not parse with math-verify; fix the task's answer."
            )
        return {"parsed": parsed, "correct": reason == "verified", "reason": reason, "boxed": boxed}


class _Score(TypedDict, total=False):
    score: float


def _zero(scorer: dict[str, Any] | None) -> _Score:
    """A verdict's score part when no answer reached the grader: 0 for a task with its own scorer."""
    return {} if scorer is None else {"score": 0.0}
