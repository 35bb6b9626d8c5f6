"""Grading code answers: extract the code, run the hidden tests in a sandbox, read the verdict.

The tests run in the harness process of `argym.envs.sandbox.pyharness`; the
candidate runs in a separate process forked before the tests were read, and
the verdict comes back on the harness's result descriptor with a per-run nonce,
after a ready line written before the program ran: no ready line is a harness
fault (`InfrastructureError`), never the candidate's failure.

What is counted is decided here, from the test source, not by how far the run
got: the task's asserts (`counted_asserts`: every ``assert`` statement whose
condition is not a constant) are the denominator, and an assert passed only
if the harness reports that it ran and held every time it ran. An assert in a
loop is one assert that must hold on every iteration. So a candidate that
exits, crashes or kills the harness after a few right answers gets credit for
those asserts only, as one that answers wrong from then on does.
"""

from __future__ import annotations

import builtins
import json
import re
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from argym.envs.sandbox.base import ExecResult, Limits, Program, Sandbox, SandboxError
from argym.envs.sandbox.pyharness_asserts import counted_asserts
from argym.errors import InfrastructureError
from argym.types import Task

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
MAX_CODE_CHARS = 100_000
MAX_OUTPUT_CHARS = 1_000

# failure kinds, in `info["verdict"]["kind"]`
KINDS = (
    "ok",
    "wrong_answer",
    "exception",
    "timeout",
    "memory",
    "output_limit",
    "syntax_error",
    "crash",
    "exit",
    "no_code",
    "test_error",
    "no_verdict",
)

# what a failed attempt is told (`feedback`): see the module docstring of `argym.envs.code.env`
FEEDBACK_MODES = ("summary", "full")


# the harness script's files, in the order they are joined (`argym.envs.sandbox.pyharness` says why)
HARNESS_PARTS = ("pyharness_wire.py", "pyharness_asserts.py", "pyharness.py")


@lru_cache(maxsize=1)
def harness_source() -> str:
    """The harness as the one stdlib-only script passed with ``-c``: its parts, each defining the next's names."""
    folder = Path(__file__).parent.parent / "sandbox"
    return "\n\n".join((folder / name).read_text(encoding="utf-8") for name in HARNESS_PARTS)


def extract_code(text: str) -> str:
    """The last fenced block (```python or bare ```; an unclosed last fence runs to the end), else the text."""
    blocks = [
        m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in ("", "python", "py", "python3")
    ]
    return blocks[-1] if blocks else text


def program_for(task: Task, code: str) -> str:
    """The program the candidate runs: the stub, then the answer (a body continues the stub)."""
    stub = task.meta.get("stub", "")
    first = next((ln for ln in code.splitlines() if ln.strip()), "")
    if first[:1] in (" ", "\t"):
        return (stub if stub.endswith("\n") else stub + "\n") + code
    return stub.rstrip() + "\n    pass\n\n" + code if stub.strip() else code


def _runnable_stub(stub: str) -> str:
    """The stub as the tests' context: a bare ``def f(x):`` gets a ``pass`` body."""
    try:
        compile(stub, "stub", "exec")
        return stub
    except SyntaxError:
        return stub.rstrip() + "\n    pass\n"


def _asserts_of(task: Task) -> list[str]:
    """The ids of `task`'s counted asserts; none if its tests do not parse (the harness then says test_error)."""
    try:
        return counted_asserts(task.tests or "")
    except SyntaxError:
        return []


def read_channel(raw: bytes | None, nonce: str) -> tuple[bool, dict[str, Any] | None]:
    """(ready, record) from the harness's result channel: its ready line, then its verdict record, each
    a JSON line carrying `nonce`; record is None if missing or not the run's (see `argym.envs.sandbox.pyharness`)."""
    lines = (raw or b"").split(b"\n", 1)
    if _json_line(lines[0]) != {"ready": nonce}:
        return False, None
    record = _json_line(lines[1]) if len(lines) > 1 else None
    return True, record if isinstance(record, dict) and record.get("nonce") == nonce else None


def _json_line(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def tally(asserts: list[str], reported: Any) -> tuple[int, int]:
    """(passed, failed) among `asserts`: passed = ran and held every time; failed = failed at least once.
    `reported` is the harness's ``{id: [held, failed]}``; an assert it does not report never ran."""
    reported = reported if isinstance(reported, dict) else {}
    passed = failed = 0
    for key in asserts:
        held, broke = (reported.get(key) or [0, 0])[:2]
        failed += broke > 0
        passed += held > 0 and broke == 0
    return passed, failed


def grade(
    sandbox: Sandbox, task: Task, answer: str, timeout_s: float = 5.0, limits: Limits | None = None
) -> dict[str, Any]:
    """Run `task`'s tests on `answer`; the verdict dict of `CodeEnv` (raises `InfrastructureError`).

    ``passed``/``failed`` count the task's asserts (`tally`); ``total`` is how many it has
    (`counted_asserts`), so ``total - passed - failed`` asserts never ran.
    """
    run = _prepare(sandbox, task, answer, timeout_s, limits)
    if isinstance(run, dict):
        return run
    try:
        r = sandbox.run(
            run.program.argv,
            stdin=run.program.stdin,
            limits=run.program.limits,
            result_channel=True,
            warm=True,
        )
    except SandboxError as e:
        raise InfrastructureError(f"the sandbox failed: {e}") from e
    return _read(run, r)


def grade_many(
    sandbox: Sandbox, items: list[tuple[Task, str]], timeout_s: float = 5.0, limits: Limits | None = None
) -> list[dict[str, Any] | InfrastructureError]:
    """`grade` for many ``(task, answer)`` pairs at once, every sandbox slot kept busy
    (`Sandbox.run_many`); the verdicts in order, an `InfrastructureError` in place of a pair the
    sandbox could not grade."""
    runs = [_prepare(sandbox, task, answer, timeout_s, limits) for task, answer in items]
    pending = [r for r in runs if isinstance(r, _Run)]
    done = iter(sandbox.run_many([r.program for r in pending]))
    out: list[dict[str, Any] | InfrastructureError] = []
    for run in runs:
        if isinstance(run, dict):
            out.append(run)
            continue
        r = next(done)
        try:
            if isinstance(r, SandboxError):
                raise InfrastructureError(f"the sandbox failed: {r}") from r
            out.append(_read(run, r))
        except InfrastructureError as e:
            out.append(e)
    return out


@dataclass(frozen=True)
class _Run:
    """A graded answer's sandbox call, and what reading its result needs."""

    program: Program
    nonce: str
    asserts: list[str]
    limits: Limits


def _prepare(
    sandbox: Sandbox, task: Task, answer: str, timeout_s: float, limits: Limits | None
) -> _Run | dict[str, Any]:
    """The harness call grading `answer`, or the verdict itself when there is no code to run."""
    asserts = _asserts_of(task)
    code = extract_code(answer)
    if not code.strip() or len(code) > MAX_CODE_CHARS:
        message = (
            "no code found in the answer"
            if not code.strip()
            else f"the code is longer than {MAX_CODE_CHARS} characters"
        )
        return {
            "kind": "no_code",
            "passed": 0,
            "failed": 0,
            "total": len(asserts),
            "message": message,
            "output": "",
        }
    nonce = secrets.token_hex(16)
    job = {
        "nonce": nonce,
        "timeout_s": timeout_s,
        "program": program_for(task, code),
        "context": _runnable_stub(task.meta.get("stub", "")),
        "tests": task.tests or "",
        "entry_point": task.meta["entry_point"],
    }
    limits = (limits or sandbox.limits).with_(timeout_s=timeout_s + 5.0, cpu_s=int(timeout_s) + 1)
    # the harness reads its whole job from stdin before anything runs: it may be started ahead (warm)
    program = Program(
        ["python", "-c", harness_source()],
        stdin=json.dumps(job).encode("utf-8"),
        limits=limits,
        result_channel=True,
        warm=True,
    )
    return _Run(program, nonce, asserts, limits)


def _read(run: _Run, r: ExecResult) -> dict[str, Any]:
    """The verdict from a harness run's result channel (raises `InfrastructureError` without a ready line)."""
    ready, record = read_channel(r.result, run.nonce)
    if not ready:  # the harness failed before the program ran: nothing of the candidate's is to be scored
        raise InfrastructureError(
            f"the test harness stopped before the program ran (no ready line; exit {r.exit_code}, signal {r.signal}, "
            f"timed out {r.timed_out}): {r.stderr.strip()[-500:]}"
        )
    output = (r.stdout + r.stderr)[:MAX_OUTPUT_CHARS]
    if r.output_truncated:
        kind, record = (
            "output_limit",
            {"message": f"the program wrote more than {run.limits.output_bytes} bytes"},
        )
    elif record is None:
        kind = "timeout" if r.timed_out else "no_verdict"
        record = {
            "message": "time limit exceeded"
            if r.timed_out
            else "the test harness was killed or gave no result"
        }
    else:
        kind = record["kind"]
        if kind == "load_error":
            kind = "memory" if "MemoryError" in record["message"].splitlines()[-1:][0] else "exception"
    passed, failed = tally(run.asserts, record.get("asserts"))
    return {
        "kind": kind,
        "passed": passed,
        "failed": failed,
        "total": len(run.asserts),
        "message": str(record.get("message", "")),
        "output": output,
    }


_HEADS = {
    "ok": "Not every hidden test ran",
    "wrong_answer": "A hidden test failed",
    "exception": "Your code raised an exception",
    "timeout": "Your code ran past the time limit",
    "memory": "Your code ran out of memory",
    "output_limit": "Your code printed too much output",
    "syntax_error": "Your code does not parse",
    "no_code": "No code was found in your answer",
}
_REVISE = "Revise your code and answer again with one ```python code block."


def feedback(verdict: dict[str, Any], mode: str = "summary") -> str:
    """The user message after a failed attempt, in `mode` (`FEEDBACK_MODES`).

    ``"full"`` quotes the failing assert (its expected value included) and a bounded traceback;
    ``"summary"`` says how many hidden tests did not pass and what kind of failure came first,
    never a test's line, input or expected value (see `argym.envs.code.env` for the trade-off).
    """
    head = _HEADS.get(verdict["kind"], f"Your code failed ({verdict['kind']})")
    msg = verdict.get("message", "").strip()
    if verdict["kind"] in ("syntax_error", "no_code"):  # about the answer alone, no test ran: nothing to hide
        return f"{head}.\n{msg}\n{_REVISE}".replace("\n\n", "\n")
    if mode == "full":
        counts = f" ({verdict['passed']} of {verdict['total']} tests passed)" if verdict["total"] else ""
        return f"{head}{counts}.\n{msg}\n{_REVISE}".replace("\n\n", "\n")
    missed = verdict["total"] - verdict["passed"]
    counts = f" {missed} of {verdict['total']} hidden tests did not pass;" if verdict["total"] else ""
    return f"{head}.{counts} first failure: {first_failure(verdict)}.\n{_REVISE}"


def first_failure(verdict: dict[str, Any]) -> str:
    """The first failure in a few words that carry no test data. An exception is named only if it is a
    builtin one: the candidate picks its own exception classes, and their names could spell its inputs."""
    name = _builtin_error(verdict.get("message", ""))
    return {
        "ok": "a test that never ran",
        "wrong_answer": "AssertionError (a wrong result)",
        "exception": f"{name or 'an exception'} raised by your code",
        "memory": "MemoryError (out of memory)",
        "timeout": "time limit exceeded",
        "output_limit": "too much output",
        "exit": "your program exited during a test",
        "crash": "your program crashed",
        "no_verdict": "the test harness gave no result",
        "test_error": f"the hidden tests could not check your result ({name or 'an error'})",
    }.get(verdict["kind"], verdict["kind"])


_ERROR_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::|$)")


def _builtin_error(message: str) -> str | None:
    """The builtin exception class named on the last line of a traceback text, else None."""
    lines = message.strip().splitlines()
    m = _ERROR_LINE.match(lines[-1].strip()) if lines else None
    if m is None:
        return None
    cls = getattr(builtins, m.group(1), None)
    return m.group(1) if isinstance(cls, type) and issubclass(cls, BaseException) else None
