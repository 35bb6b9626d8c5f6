"""The agent's diff, read and filtered in the sandbox (steps 1 and 2 of `argym.envs.swe.grading`): git runs
without the agent's configuration against a private copy of the pristine git directory, each file's path is
read from its ``diff --git`` header, and changes to tests and to what steers the test run are dropped."""

from __future__ import annotations

import re

from argym.envs.swe.workspace import BASE_GIT, ROOT, Workspace

_TEST_PATH = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*$|_tests?\.py$")
# What the test run reads besides the code under test: pytest's configuration files of every name it has
# known (pytest.toml and .pytest.toml since pytest 9, .pytest.ini), conftests, site hooks, packaging metadata
# (a *.dist-info or *.egg-info on sys.path declares pytest11 entry points), modules that shadow the runner,
# and compiled files and caches (`_CACHE`), which Python and pytest load in place of the source they name.
_CACHE = r"(^|/)(__pycache__|\.pytest_cache)/|\.py[co]$"
_STEERING = re.compile(
    r"(^|/)(conftest\.py|setup\.cfg|tox\.ini|\.?pytest\.ini|\.?pytest\.toml|pyproject\.toml|"
    r"setup\.py|sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$"
    r"|(^|/)[^/]*\.(dist|egg)-info/|^(_?pytest|pluggy|py)(\.py$|/)|" + _CACHE
)
# git without the agent's configuration: a fresh HOME, no global/system config or attributes, a private copy of
# the pristine git directory (made by mktemp, so nothing the agent left in /tmp is reused).
_GIT_ENV = f"""g="$(mktemp -d /tmp/.argym-git.XXXXXXXX)"
cp -r {BASE_GIT} "$g/git"
export HOME="$g" XDG_CONFIG_HOME="$g" GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 GIT_ATTR_NOSYSTEM=1 \
  GIT_DIR="$g/git" GIT_WORK_TREE={ROOT} GIT_INDEX_FILE="$g/git/index"
stage() {{ git -c core.attributesFile=/dev/null add -A "$@" >/dev/null; }}
"""
# The agent's workspace holds the caches its own test runs wrote: they are not part of its change.
_NO_CACHES = (
    "':(exclude,glob)**/__pycache__/**' ':(exclude,glob)**/*.py[co]' ':(exclude,glob)**/.pytest_cache/**'"
)
_DIFF_OPTS = (
    "--binary --no-color --no-renames --no-ext-diff --no-textconv --src-prefix=a/ --dst-prefix=b/ "
    "--no-relative"
)
DIFF_SCRIPT = f"""set -e
{_GIT_ENV}stage . {_NO_CACHES}
git -c core.quotePath=true diff --cached {_DIFF_OPTS} "$1"
"""
# Applies the diff on stdin (its output on stderr), then prints the paths it changed on disk, one per line
# (git-quoted), against the tree as it was before (ignored files and caches included: a .gitignore in the
# patch hides nothing, and a compiled file it writes is listed). Exit 3: the patch does not apply; 4: what it
# changed cannot be listed.
APPLY_SCRIPT = f"""set -e
{_GIT_ENV}stage --force .
before="$(git write-tree)"
cat > "$g/patch.diff"
(cd {ROOT} && unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE && {{ git apply --verbose "$g/patch.diff" ||
  patch --batch --fuzz=5 -p1 -i "$g/patch.diff"; }}) >&2 2>&1 || exit 3
stage --force . || exit 4
git -c core.quotePath=true diff --cached --name-only --no-renames "$before" || exit 4
"""


def is_test_path(path: str) -> bool:
    """A file whose changes do not count: tests and what steers the test run."""
    return bool(_TEST_PATH.search(path) or _STEERING.search(path))


def unquote(name: str) -> str:
    """A path as git prints it (C-quoted in double quotes when it holds unusual bytes) → the path."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


_QUOTED_HEADER = re.compile(r'"((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"')


def header_path(line: str) -> str | None:
    """The path of a ``diff --git a/P b/P`` header (`agent_diff` asks git for no renames, so both name P);
    None if the header is not of that form."""
    rest = line.removeprefix("diff --git ")
    m = _QUOTED_HEADER.fullmatch(rest)
    if m:
        a, b = unquote(f'"{m.group(1)}"'), unquote(f'"{m.group(2)}"')
    else:
        k = (len(rest) - 5) // 2
        a, b = rest[: k + 2], rest[k + 3 :]
        if rest != f"{a} {b}":
            return None
    if not (a.startswith("a/") and b.startswith("b/") and a[2:] == b[2:] and a[2:]):
        return None
    return a[2:]


def split_diff(diff: str) -> tuple[str, list[str], list[str]]:
    """(the diff without test/steering files, the files kept, the files dropped).

    A part whose header does not name one path the way `agent_diff`'s git writes it is dropped
    (listed by its header): what cannot be read cannot be shown to be harmless.
    """
    parts = re.split(r"(?m)^(?=diff --git )", diff)
    kept, files, dropped = [], [], []
    for part in parts:
        if not part.startswith("diff --git "):
            continue
        header = part.split("\n", 1)[0]
        path = header_path(header)
        if path is None or is_test_path(path):
            dropped.append(path if path is not None else header[:200])
        else:
            kept.append(part)
            files.append(path)
    return "".join(kept), sorted(set(files)), sorted(set(dropped))


def agent_diff(ws: Workspace, base_commit: str) -> tuple[str | None, str]:
    """The agent's changes (None when they cannot be read: the agent's failure) and a reason."""
    r = ws.exec(["bash", "-c", DIFF_SCRIPT, "diff", base_commit], timeout_s=120)
    if r.output_truncated:
        return None, f"the diff is larger than {ws.limits.output_bytes} bytes"
    if r.timed_out or r.exit_code != 0:
        return None, f"the changes could not be read (git exited {r.exit_code}): {r.stderr.strip()[-300:]}"
    return r.stdout, ""
