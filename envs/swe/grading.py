"""Grading an agent's work in a fresh sandbox, the SWE-bench way, with a test run the workspace cannot steer.

1. `agent_diff` (`argym.envs.swe.diffs`) takes the agent's changes against the base commit *inside its
   own workspace* (git runs in the sandbox, against a copy of the read-only
   pristine git directory, with a fresh ``HOME``, no global or system git
   configuration and explicit diff options, so neither a rewritten ``.git``
   nor a ``~/.gitconfig`` changes the diff's form); `split_diff` reads each
   file's path from its ``diff --git`` header (a header it cannot read is
   dropped, never kept) and drops changes to test files and to files that
   steer the test run (`is_test_path`).
2. `grade` opens a **fresh** workspace of the base commit and applies the diff
   (``git apply``, then ``patch --fuzz=5`` as SWE-bench's harness does); then it
   lists, with git, the files the patch actually changed on disk, and rejects
   the patch if one of them is a test or steering file (whatever the diff's
   text claimed). It applies the instance's ``test_patch``, runs the tests, and
   parses the log with swebench's own parser (``swebench.harness.log_parsers``,
   swebench pinned to 5.0.2 in the ``swe`` extra).
3. The default test command (instances without ``test_cmd`` or
   ``eval_script``) runs pytest under the grader's control (`pytest_script`):
   the base commit's own pytest configuration named with ``-c`` (or an empty
   one), ``--rootdir``/``--confcutdir`` at the repository, no plugin
   autoloading (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), ``python -P`` (the
   repository is not on ``sys.path`` while pytest starts, so neither a module
   shadowing pytest nor a ``*.dist-info`` entry point is found), a fresh
   ``HOME``, no cache; and two `Sentinels`, tests with unpredictable names
   written per grading next to the instance's tests, one that must fail and
   one that must pass. A run in which they are not reported that way, or in
   which a test is reported with two different statuses, was tampered with
   from inside (the code under test runs in pytest's process and can reach
   its hooks): the verdict is ``tampered`` and the reward 0.
4. Resolved means every FAIL_TO_PASS and PASS_TO_PASS test has status
   PASSED (or XFAIL, as in swebench); a missing, skipped or errored test is a
   failure, and a log whose tests all pass while the test command's exit
   code (read from the sandbox, not from the log) is not the expected one
   (0; 1 with the must-fail sentinel) is rejected (swebench v5's rule against
   faked ``PASSED`` lines).

What this guarantees and what it cannot: docs/swe_grading.md.
"""

from __future__ import annotations

import configparser
import itertools
import re
import secrets
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from argym.envs.sandbox.base import SandboxError
from argym.envs.swe.diffs import APPLY_SCRIPT, is_test_path, unquote
from argym.envs.swe.instances import Instance
from argym.envs.swe.workspace import ROOT, Workspace
from argym.errors import InfrastructureError

START, END, EXIT = ">>>>> Start Test Output", ">>>>> End Test Output", ">>>>> Test Exit Code"
PASSING = ("PASSED", "XFAIL")
MAX_DIFF_BYTES = 1 << 20
TEST_PATCH_SCRIPT = """cat > /tmp/.argym-test.diff
git apply --verbose /tmp/.argym-test.diff 2>&1 || patch --batch --fuzz=5 -p1 -i /tmp/.argym-test.diff 2>&1
"""
_EXIT_LINE = re.compile(rf"(?m)^{EXIT}: (\d+)\s*$")
TEST_CMD = "python3 -m pytest -rA -p no:cacheprovider --tb=short"


def parse_log(log: str, parser: str = "parse_log_pytest") -> dict[str, str]:
    """{test: status} by swebench's named log parser, reading only the text between the markers."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    if START not in log or END not in log:
        return {}
    body = log.split(START, 1)[1].split(END, 1)[0]
    return PARSER_REGISTRY[parser](body, None)


def conflicting(log: str, parser: str = "parse_log_pytest") -> list[str]:
    """Tests the log reports with two different statuses (pytest reports each once: a forged line)."""
    from swebench.harness.log_parsers import PARSER_REGISTRY

    if START not in log or END not in log:
        return []
    seen: dict[str, str] = {}
    out: set[str] = set()
    for line in log.split(START, 1)[1].split(END, 1)[0].split("\n"):
        for test, status in PARSER_REGISTRY[parser](line, None).items():
            if seen.setdefault(test, status) != status:
                out.add(test)
    return sorted(out)


@dataclass(frozen=True)
class Sentinels:
    """Two tests with names drawn per grading, run in the same pytest process as the instance's tests.

    An honest run reports `must_fail` FAILED and `must_pass` PASSED; code that rewrites
    outcomes inside the run (a hook registered from the package under test) flips them too,
    unless it singles out the instance's own tests (docs/swe_grading.md says what this cannot catch).
    """

    path: str
    """the sentinel module, relative to the repository"""
    must_fail: str
    must_pass: str

    @classmethod
    def draw(cls, instance: Instance) -> Sentinels:
        first = instance.FAIL_TO_PASS[0].split("::")[0]
        folder = PurePosixPath(first).parent
        path = str(folder / f"test_{secrets.token_hex(6)}.py")
        fail, ok = (f"test_{secrets.token_hex(6)}" for _ in range(2))
        return cls(path, f"{path}::{fail}", f"{path}::{ok}")

    def source(self) -> str:
        fail, ok = self.must_fail.split("::")[1], self.must_pass.split("::")[1]
        a, b = secrets.randbelow(1 << 30), secrets.randbelow(1 << 30) | 1
        return (
            f"def {ok}():\n    assert {a} + {b} == {a + b}\n\n\ndef {fail}():\n    assert {a} + {b} == {a}\n"
        )

    def tampering(self, statuses: dict[str, str], exit_code: int | None, reported: bool) -> str:
        """Why the run cannot be trusted ("" if it can); `reported`: some instance test has a status."""
        fail, ok = statuses.get(self.must_fail, "MISSING"), statuses.get(self.must_pass, "MISSING")
        if (fail, ok) == ("FAILED", "PASSED"):
            return ""
        wrong = fail not in ("FAILED", "MISSING") or ok not in ("PASSED", "MISSING")
        if not wrong and (exit_code is None or (fail == ok == "MISSING" and not reported)):
            return ""  # the run was cut (timeout, flood) or ended before any test ran (collection error)
        return f"the sentinel test that must fail was reported {fail} and the one that must pass {ok}"


def resolve(
    instance: Instance,
    statuses: dict[str, str],
    exit_code: int | None,
    sentinels: Sentinels | None = None,
    conflicts: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """The per-test verdict and the resolution (see the module docstring)."""
    tests = {t: statuses.get(t, "MISSING") for t in (*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS)}
    f2p = [t for t in instance.FAIL_TO_PASS if tests[t] in PASSING]
    p2p = [t for t in instance.PASS_TO_PASS if tests[t] in PASSING]
    all_pass = len(f2p) == len(instance.FAIL_TO_PASS) and len(p2p) == len(instance.PASS_TO_PASS)
    rejected, expected_exit = "", 0
    if sentinels is not None:
        expected_exit = 1
        why = sentinels.tampering(statuses, exit_code, any(s != "MISSING" for s in tests.values()))
        rejected = f"tampered: {why}" if why else ""
    if not rejected and conflicts:
        rejected = f"tampered: the log reports {conflicts[0]} with two different statuses"
    if not rejected and all_pass and exit_code != expected_exit:
        rejected = f"the log shows every test passing but the test command exited with {exit_code}"
    return {
        "resolved": all_pass and not rejected,
        "rejected": rejected,
        "tampered": rejected.startswith("tampered"),
        "tests": tests,
        "FAIL_TO_PASS": {"passed": len(f2p), "total": len(instance.FAIL_TO_PASS)},
        "PASS_TO_PASS": {"passed": len(p2p), "total": len(instance.PASS_TO_PASS)},
    }


def test_command(instance: Instance) -> str:
    """An instance's own ``test_cmd`` on its tests (the default command is `pytest_script`)."""
    tests = sorted(set(instance.FAIL_TO_PASS) | set(instance.PASS_TO_PASS))
    return (instance.test_cmd or TEST_CMD) + " " + " ".join(shlex.quote(t) for t in tests)


_INI_SECTIONS = {
    "pytest.ini": "pytest",
    ".pytest.ini": "pytest",
    "tox.ini": "pytest",
    "setup.cfg": "tool:pytest",
}


def base_config(base: Path, instance: Instance) -> str | None:
    """The pytest configuration file pytest itself would pick in the pristine base tree (relative to it), or None.

    pytest's rule: from the tests' common folder up to the repository, the first folder with
    ``pytest.toml``, ``.pytest.toml``, ``pytest.ini``, ``.pytest.ini``, a ``pyproject.toml`` with
    ``[tool.pytest]``/``[tool.pytest.ini_options]``, a ``tox.ini`` with ``[pytest]`` or a ``setup.cfg``
    with ``[tool:pytest]``. The grader names it with ``-c``, so no other file is ever read.
    """
    folders = [
        PurePosixPath(t.split("::")[0]).parent.parts for t in (*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS)
    ]
    common = PurePosixPath(*[p[0] for p in itertools.takewhile(lambda p: len(set(p)) == 1, zip(*folders))])
    for folder in [common, *common.parents]:
        for name in (
            "pytest.toml",
            ".pytest.toml",
            "pytest.ini",
            ".pytest.ini",
            "pyproject.toml",
            "tox.ini",
            "setup.cfg",
        ):
            path = base / folder / name
            if path.is_file() and not path.is_symlink() and pytest_options(path) is not None:
                return str(folder / name)
    return None


def pytest_options(path: Path) -> dict[str, Any] | None:
    """The pytest section of a configuration file (None if it has none; a dedicated file has one even empty)."""
    dedicated = path.name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini")
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            table = data.get("pytest") if dedicated else data.get("tool", {}).get("pytest")
            if not isinstance(table, dict):
                return {} if dedicated else None
            return {**table, **table.get("ini_options", {})}
        parser = configparser.ConfigParser(interpolation=None)
        parser.read_string(path.read_text(encoding="utf-8"))
        section = _INI_SECTIONS[path.name]
        return dict(parser[section]) if parser.has_section(section) else ({} if dedicated else None)
    except (ValueError, AttributeError, configparser.Error, UnicodeDecodeError):
        return {} if dedicated else None


def draw_sentinels(ws: Workspace, instance: Instance) -> Sentinels | None:
    """Sentinels for the grader's own pytest run; None where that run is not the grader's (a row's ``test_cmd``
    or ``eval_script``) or where the base configuration renames test functions (``python_functions``), so
    that ``test_*`` sentinels would not be collected and an honest run would look tampered with."""
    if instance.eval_script or instance.test_cmd:
        return None
    base = getattr(ws, "base", None)
    config = base_config(Path(base), instance) if base else None
    if base and config and "python_functions" in (pytest_options(Path(base) / config) or {}):
        return None
    return Sentinels.draw(instance)


def pytest_script(instance: Instance, config: str | None, sentinels: Sentinels | None) -> str:
    """The grader's pytest run (module docstring, 3.); `config` is the base commit's, relative to the repository."""
    tests = sorted(set(instance.FAIL_TO_PASS) | set(instance.PASS_TO_PASS))
    cfg = shlex.quote(f"{ROOT}/{config}") if config else '"$d/pytest.ini"'
    args = " ".join(shlex.quote(t) for t in ((sentinels.path,) if sentinels else ()) + tuple(tests))
    return f"""d="$(mktemp -d /tmp/argym-grade.XXXXXXXX)" && : > "$d/pytest.ini" && cd {ROOT} || exit 1
exec env -u PYTEST_ADDOPTS -u PYTEST_PLUGINS HOME="$d" PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 PYTHONSAFEPATH=1 \\
  PYTHONNOUSERSITE=1 python3 -P -m pytest -c {cfg} --rootdir={ROOT} --confcutdir={ROOT} -p no:cacheprovider \\
  -rA --tb=short {args} </dev/null 2>&1
"""


def run_tests(
    ws: Workspace, instance: Instance, timeout_s: float, sentinels: Sentinels | None = None
) -> tuple[str, int | None]:
    """Run the instance's tests in `ws`; the log with swebench's markers, and the command's exit code."""
    if instance.eval_script:  # SWE-bench v5 instances bring their own script (it prints the markers)
        from argym.envs.swe.swebench_images import eval_script

        # Through a file (a test patch may pass the 128 KiB limit of one argument); one stream, so that
        # `set -x`'s marker lines (stderr) stay in place around the tests' output (stdout).
        r = ws.exec(
            ["bash", "-c", "cat > /tmp/.argym-eval.sh && exec bash /tmp/.argym-eval.sh </dev/null 2>&1"],
            stdin=eval_script(instance).encode(),
            timeout_s=timeout_s,
        )
        log = r.stdout + r.stderr
        if r.timed_out or r.output_truncated:
            return log, None
        codes = _EXIT_LINE.findall(log.rsplit(END, 1)[-1]) if END in log else []
        return log, int(codes[-1]) if codes else r.exit_code  # the test command's status, written after END
    if instance.test_cmd:
        r = ws.exec(["bash", "-c", test_command(instance) + " 2>&1"], timeout_s=timeout_s)
    else:
        base = getattr(ws, "base", None)
        config = base_config(Path(base), instance) if base else None
        if sentinels is not None:
            w = ws.exec(
                ["bash", "-c", f"cat > {shlex.quote(sentinels.path)}"],
                stdin=sentinels.source().encode(),
                timeout_s=60,
            )
            if w.exit_code != 0:  # its folder holds the instance's tests, which no agent's patch may touch
                raise InfrastructureError(
                    f"could not write the sentinel tests to {sentinels.path}: {w.stderr[-300:]}"
                )
        r = ws.exec(["bash", "-c", pytest_script(instance, config, sentinels)], timeout_s=timeout_s)
    code = None if (r.timed_out or r.output_truncated) else r.exit_code
    return f"{START}\n{r.stdout}{r.stderr}\n{END}\n{EXIT}: {code}\n", code


def grade(fresh: Workspace, instance: Instance, diff: str, timeout_s: float = 300.0) -> dict[str, Any]:
    """Apply `diff` and the test patch in the `fresh` workspace, run the tests, and judge.

    Raises `InfrastructureError` for harness faults (the sandbox failed, the
    instance's own test patch does not apply); everything else is a verdict.
    """
    verdict: dict[str, Any] = {"patch": "empty" if not diff.strip() else "applied"}
    sentinels = draw_sentinels(fresh, instance)
    try:
        if diff.strip():
            if len(diff.encode()) > MAX_DIFF_BYTES:
                return {**verdict, **_unresolved(instance, "patch_too_large"), "patch": "too_large"}
            r = fresh.exec(["bash", "-c", APPLY_SCRIPT], stdin=diff.encode(), timeout_s=120)
            if r.exit_code == 3:
                return {
                    **verdict,
                    **_unresolved(instance, "patch_failed"),
                    "patch": "failed",
                    "apply_output": r.stderr[-1000:],
                }
            if r.exit_code == 4 or r.output_truncated:
                return {
                    **verdict,
                    **_unresolved(instance, "the files the patch changed could not be listed"),
                    "patch": "unreadable",
                    "apply_output": r.stderr[-1000:],
                }
            if r.exit_code != 0:
                raise InfrastructureError(
                    f"could not apply the patch or list what it changed (exit {r.exit_code}): "
                    f"{r.stderr[-500:]}"
                )
            touched = sorted(p for p in map(unquote, r.stdout.splitlines()) if is_test_path(p))
            if touched:  # the diff's text named other files than those it wrote: a forged patch
                why = f"tampered: the patch wrote test or configuration files: {touched[:5]}"
                return {**verdict, **_unresolved(instance, why), "patch": "rejected"}
        if instance.test_patch.strip() and not instance.eval_script:  # an eval script applies it itself
            r = fresh.exec(
                ["bash", "-c", TEST_PATCH_SCRIPT], stdin=instance.test_patch.encode(), timeout_s=120
            )
            if r.exit_code != 0:
                raise InfrastructureError(
                    f"the test patch of {instance.instance_id} does not apply: {(r.stdout + r.stderr)[-500:]}"
                )
        log, code = run_tests(fresh, instance, timeout_s, sentinels)
    except SandboxError as e:
        raise InfrastructureError(f"grading sandbox failed: {e}") from e
    parser = str(instance.extra.get("log_parser", "parse_log_pytest"))
    result = resolve(instance, parse_log(log, parser), code, sentinels, conflicting(log, parser))
    return {**verdict, **result, "exit_code": code}


def _unresolved(instance: Instance, why: str) -> dict[str, Any]:
    result = resolve(instance, {}, None)
    return {**result, "rejected": why, "tampered": why.startswith("tampered")}
