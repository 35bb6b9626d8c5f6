"""Grading code answers: extract the code, run the hidden tests in a sandbox, read the verdict.

The tests run in the harness process of `argym.envs.sandbox.pyharness`; the
candidate runs in a separate process forked before the tests were read, and
the verdict comes back on the harness's result descriptor with a per-run nonce.
"""

from __future__ import annotations

import json
import re
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Any

from argym.errors import InfrastructureError
from argym.types import Task
from argym.envs.sandbox.base import Limits, Sandbox, SandboxError

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
MAX_CODE_CHARS = 100_000
MAX_OUTPUT_CHARS = 1_000

# failure kinds, in `info["verdict"]["kind"]`
KINDS = ("ok", "wrong_answer", "exception", "timeout", "memory", "output_limit", "syntax_error", "crash",
         "exit", "no_code", "test_error", "no_verdict")


@lru_cache(maxsize=1)
def harness_source() -> str:
    return (Path(__file__).parent.parent / "sandbox" / "pyharness.py").read_text(encoding="utf-8")


def extract_code(text: str) -> str:
    """The last fenced block (```python or bare ```; an unclosed last fence runs to the end), else the text."""
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in ("", "python", "py", "python3")]
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


def grade(sandbox: Sandbox, task: Task, answer: str, timeout_s: float = 5.0,
          limits: Limits | None = None) -> dict[str, Any]:
    """Run `task`'s tests on `answer`; the verdict dict of `CodeEnv` (raises `InfrastructureError`)."""
    code = extract_code(answer)
    if not code.strip():
        return {"kind": "no_code", "passed": 0, "failed": 0, "message": "no code found in the answer", "output": ""}
    if len(code) > MAX_CODE_CHARS:
        return {"kind": "no_code", "passed": 0, "failed": 0, "output": "",
                "message": f"the code is longer than {MAX_CODE_CHARS} characters"}
    nonce = secrets.token_hex(16)
    job = {"nonce": nonce, "timeout_s": timeout_s, "program": program_for(task, code),
           "context": _runnable_stub(task.meta.get("stub", "")), "tests": task.tests or "", "entry_point": task.meta["entry_point"]}
    limits = (limits or sandbox.limits).with_(timeout_s=timeout_s + 5.0, cpu_s=int(timeout_s) + 1)
    try:
        r = sandbox.run(["python", "-c", harness_source()], stdin=json.dumps(job).encode("utf-8"),
                        limits=limits, result_channel=True)
    except SandboxError as e:
        raise InfrastructureError(f"the sandbox failed: {e}") from e
    output = (r.stdout + r.stderr)[:MAX_OUTPUT_CHARS]
    try:
        record = json.loads(r.result or b"")
        ok = isinstance(record, dict) and record.get("nonce") == nonce
    except ValueError:
        ok = False
    if r.output_truncated:
        kind, record = "output_limit", {"message": f"the program wrote more than {limits.output_bytes} bytes"}
    elif not ok:
        kind = "timeout" if r.timed_out else "no_verdict"
        record = {"message": "time limit exceeded" if r.timed_out else "the test harness was killed or gave no result"}
    else:
        kind = record["kind"]
        if kind == "load_error":
            kind = "memory" if "MemoryError" in record["message"].splitlines()[-1:][0] else "exception"
    return {"kind": kind, "passed": int(record.get("passed", 0)), "failed": int(record.get("failed", 0)),
            "message": str(record.get("message", "")), "output": output}


def feedback(verdict: dict[str, Any]) -> str:
    """The user message after a failed attempt."""
    head = {
        "wrong_answer": "A hidden test failed", "exception": "Your code raised an exception",
        "timeout": "Your code ran past the time limit", "memory": "Your code ran out of memory",
        "output_limit": "Your code printed too much output", "syntax_error": "Your code does not parse",
        "no_code": "No code was found in your answer",
    }.get(verdict["kind"], f"Your code failed ({verdict['kind']})")
    counts = f" ({verdict['passed']} checks passed, {verdict['failed']} failed)" if verdict["passed"] + verdict["failed"] else ""
    msg = verdict.get("message", "").strip()
    return f"{head}{counts}.\n{msg}\nRevise your code and answer again with one ```python code block.".replace("\n\n", "\n")
