"""Grading an agent's work in a fresh sandbox, the SWE-bench way.

1. `agent_diff` takes the agent's changes against the base commit *inside its
   own workspace* (git runs in the sandbox, against the read-only pristine git
   directory, so a rewritten ``.git`` or a hostile git config changes nothing);
   `split_diff` drops changes to test files and to files that steer the test
   run (``conftest.py``, pytest/tox/setup config, ``*.pth``, ``sitecustomize``).
2. `grade` opens a **fresh** workspace of the base commit, applies the diff
   (``git apply``, then ``patch --fuzz=5`` as SWE-bench's harness does), applies
   the instance's ``test_patch``, runs the tests, and parses the log with
   swebench's own parser (``swebench.harness.log_parsers``, swebench pinned
   to 5.0.2 in the ``swe`` extra).
3. Resolved means every FAIL_TO_PASS and PASS_TO_PASS test has status
   PASSED (or XFAIL, as in swebench); a missing, skipped or errored test is a
   failure, and a log whose tests all pass while the test command's exit
   code (read from the sandbox, not from the log) is non-zero is rejected
   (swebench v5's rule against faked ``PASSED`` lines).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from argym.errors import InfrastructureError
from argym.envs.sandbox.base import SandboxError
from argym.envs.swe.instances import Instance
from argym.envs.swe.workspace import BASE_GIT, ROOT, Workspace

START, END, EXIT = ">>>>> Start Test Output", ">>>>> End Test Output", ">>>>> Test Exit Code"
PASSING = ("PASSED", "XFAIL")
MAX_DIFF_BYTES = 1 << 20
_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_tests?\.py$")
_STEERING = re.compile(r"(^|/)(conftest\.py|setup\.cfg|tox\.ini|pytest\.ini|pyproject\.toml|setup\.py|"
                       r"sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$")
DIFF_SCRIPT = f"""set -e
rm -rf /tmp/.argym-git && cp -r {BASE_GIT} /tmp/.argym-git
export GIT_DIR=/tmp/.argym-git GIT_WORK_TREE={ROOT} GIT_INDEX_FILE=/tmp/.argym-git/index
git add -A . ':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/*.pyc' ':(exclude,glob)**/.pytest_cache/**' >/dev/null
git diff --cached --binary --no-color --no-ext-diff --no-textconv "$1"
"""
APPLY_SCRIPT = f"""cat > /tmp/.argym.diff
git apply --verbose /tmp/.argym.diff 2>&1 || patch --batch --fuzz=5 -p1 -i /tmp/.argym.diff 2>&1
"""
_EXIT_LINE = re.compile(rf"(?m)^{EXIT}: (\d+)\s*$")
TEST_CMD = "python3 -m pytest -rA -p no:cacheprovider --tb=short"


def is_test_path(path: str) -> bool:
    """A file whose changes do not count: tests and what steers the test run."""
    return bool(_TEST_PATH.search(path) or _STEERING.search(path))


def split_diff(diff: str) -> tuple[str, list[str], list[str]]:
    """(the diff without test/steering files, the files kept, the files dropped)."""
    parts = re.split(r"(?m)^(?=diff --git )", diff)
    kept, files, dropped = [], [], []
    for part in parts:
        if not part.startswith("diff --git "):
            continue
        m = re.match(r"diff --git a/(\S+) b/(\S+)", part)
        paths = {m.group(1), m.group(2)} if m else {part}
        if any(is_test_path(p) for p in paths):
            dropped.extend(sorted(paths))
        else:
            kept.append(part)
            files.extend(sorted(paths))
    return "".join(kept), sorted(set(files)), sorted(set(dropped))


def agent_diff(ws: Workspace, base_commit: str) -> tuple[str | None, str]:
    """The agent's changes (None when they cannot be read: the agent's failure) and a reason."""
    r = ws.exec(["bash", "-c", DIFF_SCRIPT, "diff", base_commit], timeout_s=120)
    if r.output_truncated:
        return None, f"the diff is larger than {ws.limits.output_bytes} bytes"
    if r.timed_out or r.exit_code != 0:
        return None, f"the changes could not be read (git exited {r.exit_code}): {r.stderr.strip()[-300:]}"
    return r.stdout, ""


def parse_log(log: str, parser: str = "parse_log_pytest") -> dict[str, str]:
    """{test: status} by swebench's named log parser, reading only the text between the markers."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    if START not in log or END not in log:
        return {}
    body = log.split(START, 1)[1].split(END, 1)[0]
    return PARSER_REGISTRY[parser](body, None)


def resolve(instance: Instance, statuses: dict[str, str], exit_code: int | None) -> dict[str, Any]:
    """The per-test verdict and the resolution (see the module docstring)."""
    tests = {t: statuses.get(t, "MISSING") for t in (*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS)}
    f2p = [t for t in instance.FAIL_TO_PASS if tests[t] in PASSING]
    p2p = [t for t in instance.PASS_TO_PASS if tests[t] in PASSING]
    all_pass = len(f2p) == len(instance.FAIL_TO_PASS) and len(p2p) == len(instance.PASS_TO_PASS)
    rejected = ""
    if all_pass and exit_code != 0:
        rejected = f"the log shows every test passing but the test command exited with {exit_code}"
    return {"resolved": all_pass and not rejected, "rejected": rejected, "tests": tests,
            "FAIL_TO_PASS": {"passed": len(f2p), "total": len(instance.FAIL_TO_PASS)},
            "PASS_TO_PASS": {"passed": len(p2p), "total": len(instance.PASS_TO_PASS)}}


def test_command(instance: Instance) -> str:
    tests = sorted(set(instance.FAIL_TO_PASS) | set(instance.PASS_TO_PASS))
    return (instance.test_cmd or TEST_CMD) + " " + " ".join(shlex.quote(t) for t in tests)


def run_tests(ws: Workspace, instance: Instance, timeout_s: float) -> tuple[str, int | None]:
    """Run the instance's tests in `ws`; the log with swebench's markers, and the command's exit code."""
    if instance.eval_script:  # SWE-bench v5 instances bring their own script (it prints the markers)
        from argym.envs.swe.swebench_images import eval_script

        # Through a file (a test patch may pass the 128 KiB limit of one argument); one stream, so that
        # `set -x`'s marker lines (stderr) stay in place around the tests' output (stdout).
        r = ws.exec(["bash", "-c", "cat > /tmp/.argym-eval.sh && exec bash /tmp/.argym-eval.sh </dev/null 2>&1"],
                    stdin=eval_script(instance).encode(), timeout_s=timeout_s)
        log = r.stdout + r.stderr
        if r.timed_out or r.output_truncated:
            return log, None
        codes = _EXIT_LINE.findall(log.rsplit(END, 1)[-1]) if END in log else []
        return log, int(codes[-1]) if codes else r.exit_code  # the test command's status, written after END
    r = ws.exec(["bash", "-c", test_command(instance) + " 2>&1"], timeout_s=timeout_s)
    code = None if (r.timed_out or r.output_truncated) else r.exit_code
    return f"{START}\n{r.stdout}{r.stderr}\n{END}\n{EXIT}: {code}\n", code


def grade(fresh: Workspace, instance: Instance, diff: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """Apply `diff` and the test patch in the `fresh` workspace, run the tests, and judge.

    Raises `InfrastructureError` for harness faults (the sandbox failed, the
    instance's own test patch does not apply); everything else is a verdict.
    """
    verdict: dict[str, Any] = {"patch": "empty" if not diff.strip() else "applied"}
    try:
        if diff.strip():
            if len(diff.encode()) > MAX_DIFF_BYTES:
                return {**verdict, **_unresolved(instance, "patch_too_large"), "patch": "too_large"}
            r = fresh.exec(["bash", "-c", APPLY_SCRIPT], stdin=diff.encode(), timeout_s=120)
            if r.exit_code != 0:
                return {**verdict, **_unresolved(instance, "patch_failed"), "patch": "failed",
                        "apply_output": (r.stdout + r.stderr)[-1000:]}
        if instance.test_patch.strip() and not instance.eval_script:  # an eval script applies it itself
            r = fresh.exec(["bash", "-c", APPLY_SCRIPT], stdin=instance.test_patch.encode(), timeout_s=120)
            if r.exit_code != 0:
                raise InfrastructureError(f"the test patch of {instance.instance_id} does not apply: "
                                          f"{(r.stdout + r.stderr)[-500:]}")
        log, code = run_tests(fresh, instance, timeout_s)
    except SandboxError as e:
        raise InfrastructureError(f"grading sandbox failed: {e}") from e
    parser = str(instance.extra.get("log_parser", "parse_log_pytest"))
    result = resolve(instance, parse_log(log, parser), code)
    return {**verdict, **result, "exit_code": code}


def _unresolved(instance: Instance, why: str) -> dict[str, Any]:
    return {**resolve(instance, {}, None), "rejected": why}
