"""SWE-smith-style task synthesis from a real project's sdist (`argym swe synth`).

The sdist (which must ship its test suite) becomes a one-commit repository;
its tests run in the process sandbox with argym's pytest. Then, function by
function in a seeded order, one small mutation of the kind SWE-smith uses
(arXiv 2504.21798, §2: procedural modifications) is tried: flip a comparison,
off-by-one on an integer constant, swap two call arguments, drop an ``if``
branch, flip a boolean constant, swap ``+``/``-`` or ``and``/``or``, remove a
``return``. A mutation is kept when it breaks at least one test, at most
`max_broken`, and the suite still runs (no collection failure, no timeout).
Each kept mutation is an instance: base = the mutated code, gold ``patch`` =
the reverting diff, FAIL_TO_PASS = the broken tests, PASS_TO_PASS = a seeded
sample of the tests still passing, and a problem statement written from the
failing tests' output (never from the diff). Instances of one function share
its split, so train and test never hold the same mutated function.
"""

from __future__ import annotations

import ast
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from argym.envs.sandbox.process import ProcessSandbox
from argym.envs.swe import diffs, grading
from argym.envs.swe.instances import Instance
from argym.envs.swe.project import build_repo, git, sdist_tree
from argym.envs.swe.workspace import DEFAULT_LIMITS, ProcessWorkspace
from argym.envs.tasks import split_of
from argym.errors import ConfigError

REPOS = {
    "toolz": "pytoolz/toolz",
    "more_itertools": "more-itertools/more-itertools",
    "boltons": "mahmoud/boltons",
}
_FLIP = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


# Test ids every pytest version addresses the same way on a command line: parametrize ids with
# escaped characters, or generated for values pytest cannot print (``test_url16``), differ between
# pytest 7 (Debian's, in the docker image) and 9 (argym's).
_ADDRESSABLE = re.compile(r"^[\w./-]+\.py(::[\w.-]+(\[(?![A-Za-z_]+\d+\])[\w.,:/=+-]*\])?)+$")


@dataclass(frozen=True)
class Mutation:
    """Replace lines `first`..`last` (1-based) of `path` with `lines`."""

    path: str
    function: str
    op: str
    first: int
    last: int
    lines: tuple[str, ...]

    def apply(self, text: str) -> str:
        old = text.split("\n")
        return "\n".join(old[: self.first - 1] + list(self.lines) + old[self.last :])


def download_sdist(requirement: str, directory: Path) -> Path:
    """Download `requirement`'s source distribution (``pip download --no-binary :all:``) into `directory`.

    An sdist, not a wheel: the mutations need the project's own tests, which wheels leave out.
    """
    dest = directory.resolve()
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.tar.gz"))
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", requirement]
    r = subprocess.run([*argv, "-d", str(dest)], capture_output=True, text=True)
    got = sorted(set(dest.glob("*.tar.gz")) - before) or sorted(
        dest.glob(f"{requirement.split('=')[0].replace('-', '_')}*.tar.gz")
    )
    if r.returncode != 0 or not got:
        raise ConfigError(f"Could not download the sdist of {requirement!r}: {r.stderr.strip()[-500:]}")
    return got[-1]


def _replace_segment(lines: list[str], node: ast.expr, new: str) -> tuple[int, int, tuple[str, ...]] | None:
    if node.lineno != node.end_lineno:
        return None
    raw = lines[node.lineno - 1].encode()
    text = (raw[: node.col_offset] + new.encode() + raw[node.end_col_offset :]).decode()
    return node.lineno, node.lineno, (text,)


def _expr_mutations(node: ast.AST) -> Iterator[tuple[str, ast.expr, Callable[[], ast.expr]]]:
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
        yield (
            "flip_comparison",
            node,
            lambda: ast.Compare(node.left, [_FLIP[type(node.ops[0])]()], node.comparators),
        )
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value < 1000:
        number: int = node.value
        yield "off_by_one", node, lambda: ast.Constant(number + 1)
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "change_constant", node, lambda: ast.Constant(not node.value)
    elif (
        isinstance(node, ast.Call)
        and len(node.args) == 2
        and not node.keywords
        and not any(isinstance(a, ast.Starred) for a in node.args)
    ):
        yield "swap_arguments", node, lambda: ast.Call(node.func, [node.args[1], node.args[0]], [])
    elif isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub):
        yield (
            "swap_operator",
            node,
            lambda: ast.BinOp(
                node.left, ast.Sub() if isinstance(node.op, ast.Add) else ast.Add(), node.right
            ),
        )
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
        yield (
            "swap_operator",
            node,
            lambda: ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values),
        )


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def mutations(source: str, path: str) -> Iterator[Mutation]:
    """Every candidate mutation of every function in `source` (module-level and methods)."""
    tree = ast.parse(source)
    lines = source.split("\n")

    def functions(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.FunctionDef]]:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + node.name, node  # type: ignore[misc]
            elif isinstance(node, ast.ClassDef):
                yield from functions(node.body, prefix + node.name + ".")

    for qualname, fn in functions(tree.body, ""):
        for node in ast.walk(fn):
            if node is fn:
                continue
            if isinstance(node, ast.If) and not node.orelse and node.lineno != fn.lineno:
                indent = _indent(lines[node.lineno - 1])
                end = node.end_lineno or node.lineno
                yield Mutation(path, qualname, "drop_branch", node.lineno, end, (indent + "pass",))
            elif isinstance(node, ast.Return) and node.value is not None:
                indent = _indent(lines[node.lineno - 1])
                end = node.end_lineno or node.lineno
                yield Mutation(path, qualname, "remove_return", node.lineno, end, (indent + "pass",))
            for op, target, build in _expr_mutations(node):
                try:
                    seg = _replace_segment(lines, target, ast.unparse(build()))
                except (AttributeError, ValueError, TypeError):
                    seg = None
                if seg is not None:
                    yield Mutation(path, qualname, op, *seg)


def _statuses(ws: ProcessWorkspace, targets: list[str], timeout_s: float) -> dict[str, str] | None:
    cmd = grading.TEST_CMD + " -q " + " ".join(targets) + " 2>&1"
    r = ws.exec(["bash", "-c", cmd], timeout_s=timeout_s)
    if r.timed_out or r.output_truncated:
        return None
    log = f"{grading.START}\n{r.stdout}\n{grading.END}\n"
    return {**grading.parse_log(log), "__log__": r.stdout}


def _failure_excerpt(log: str, max_lines: int = 14) -> str:
    """The first failure's section of a pytest log, cut to its source line and ``E`` lines."""
    m = re.search(r"(?ms)^_{3,} (\S.*?) _{3,}\n(.*?)(?=^_{3,} |^={3,} )", log)
    if not m:
        return ""
    keep = [ln for ln in m.group(2).splitlines() if ln.startswith(("E ", ">", "    "))][:max_lines]
    return "\n".join(keep)


def problem_statement(project: str, version: str, broken: list[str], log: str) -> str:
    shown = "\n".join(f"- {t}" for t in broken[:8]) + (
        f"\n- ... and {len(broken) - 8} more" if len(broken) > 8 else ""
    )
    excerpt = re.sub(r" at 0x[0-9a-f]+", "", _failure_excerpt(log))
    detail = f"\n\nThe first failure:\n```\n{excerpt}\n```" if excerpt else ""
    return (
        f"{project} {version}: {len(broken)} test(s) of the project's own suite fail on the current code:\n"
        f"{shown}{detail}\n\nFind the bug in the library code and fix it so that these tests pass "
        f"(the tests are right; do not change them)."
    )


def synthesize(
    sdist: str | Path,
    *,
    max_instances: int = 25,
    seed: int = 0,
    max_broken: int = 25,
    p2p: int = 15,
    tries_per_function: int = 3,
    test_fraction: float = 0.3,
    sdist_name: str | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> list[Instance]:
    """Instances from the sdist at `sdist` (see the module docstring); `sdist_name` is what instances record."""
    tree = sdist_tree(sdist)
    project = tree.name.rsplit("-", 1)[0]
    version = tree.name.rsplit("-", 1)[1] if "-" in tree.name else ""
    package = project.replace("-", "_")
    repo_name = REPOS.get(package, f"pypi/{package}")
    work = Path(tempfile.mkdtemp(prefix="argym-synth-"))
    os.chmod(work, 0o755)  # the sandbox's uid binds the base repository's git directory from here
    sandbox = ProcessSandbox(slots=1)
    try:
        pristine = work / "pristine"
        setup_commit = build_repo(tree, pristine)
        ws = ProcessWorkspace(sandbox, pristine, DEFAULT_LIMITS)
        tests = sorted(
            str(p.relative_to(pristine)) for p in pristine.rglob("test_*.py") if ".git" not in p.parts
        )
        if not tests:
            raise ValueError(
                f"{tree.name} ships no test files (test_*.py); synthesis needs the project's tests."
            )
        base = _statuses(ws, tests, 600)
        if base is None:
            raise ValueError(f"{tree.name}'s test suite did not finish in 600 s.")
        passing = sorted(t for t, s in base.items() if s == "PASSED" and _ADDRESSABLE.match(t))
        log(f"{tree.name}: {len(passing)} tests pass at baseline")
        sources = sorted(
            p
            for p in (pristine / package).rglob("*.py")
            if p.name != "__init__.py" and not diffs.is_test_path(str(p.relative_to(pristine)))
        )
        by_function: dict[tuple[str, str], list[Mutation]] = {}
        for src in sources:
            rel = str(src.relative_to(pristine))
            for m in mutations(src.read_text(encoding="utf-8"), rel):
                by_function.setdefault((rel, m.function), []).append(m)
        rng = random.Random(seed)
        order = sorted(by_function)
        rng.shuffle(order)
        out: list[Instance] = []
        for key in order:
            if len(out) >= max_instances:
                break
            rel, function = key
            src = pristine / rel
            original = src.read_text(encoding="utf-8")
            stem = Path(rel).stem
            targets = [t for t in tests if Path(t).stem in (f"test_{stem}", f"test_{stem}s")] or tests
            for m in rng.sample(by_function[key], min(tries_per_function, len(by_function[key]))):
                (ws.repo / rel).write_text(m.apply(original), encoding="utf-8")
                try:
                    got = _statuses(ws, targets, 120)
                finally:
                    (ws.repo / rel).write_text(original, encoding="utf-8")
                if got is None:
                    continue
                in_targets = [t for t in passing if t.split("::")[0] in targets]
                broken = [t for t in in_targets if got.get(t) not in grading.PASSING]
                if not broken or len(broken) > max_broken or len(broken) == len(in_targets):
                    continue
                rest = [t for t in in_targets if t not in broken]
                same_file = [t for t in rest if t.split("::")[0] in {b.split("::")[0] for b in broken}]
                sample = sorted(rng.sample(same_file, min(p2p, len(same_file))))
                out.append(
                    _instance(
                        pristine,
                        m,
                        original,
                        project,
                        version,
                        repo_name,
                        setup_commit,
                        broken,
                        sample,
                        got["__log__"],
                        sdist_name or str(sdist),
                        test_fraction,
                    )
                )
                log(f"  kept {out[-1].instance_id}: breaks {len(broken)}")
                break
        ws.close()
        return out
    finally:
        sandbox.close()
        shutil.rmtree(work, ignore_errors=True)


def _instance(
    pristine: Path,
    m: Mutation,
    original: str,
    project: str,
    version: str,
    repo_name: str,
    setup_commit: str,
    broken: list[str],
    p2p: list[str],
    log: str,
    sdist: str,
    test_fraction: float,
) -> Instance:
    src = pristine / m.path
    src.write_text(m.apply(original), encoding="utf-8")
    try:
        gold = git(
            pristine,
            "diff",
            "-R",
            "--src-prefix=b/",
            "--dst-prefix=a/",
            "--no-color",
            "--no-ext-diff",
            "--",
            m.path,
        )
    finally:
        src.write_text(original, encoding="utf-8")
    scratch = Path(tempfile.mkdtemp(prefix="argym-synth-base-"))
    try:
        shutil.rmtree(scratch)
        tree = pristine.parent / "tree"
        if not tree.exists():
            shutil.copytree(pristine, tree, ignore=shutil.ignore_patterns(".git"))
        base_commit = build_repo(tree, scratch, gold)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    digest = hashlib.sha256(f"{m.path}:{m.function}:{m.op}:{m.first}".encode()).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9_.]", "_", m.function)
    iid = f"{repo_name.replace('/', '__')}-{version}.{name}.{m.op}.{digest}"
    return Instance(
        instance_id=iid,
        repo=repo_name,
        base_commit=base_commit,
        problem_statement=problem_statement(project, version, broken, log),
        patch=gold,
        test_patch="",
        FAIL_TO_PASS=tuple(broken),
        PASS_TO_PASS=tuple(p2p),
        version=version,
        environment_setup_commit=setup_commit,
        split=split_of(f"{repo_name}:{m.path}:{m.function}", test_fraction),
        sdist=sdist,
        mutated=f"{m.path}:{m.function}",
    )
