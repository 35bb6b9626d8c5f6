"""Forking slots of the process backend and `Sandbox.run_many` (issue 19; docs/sandboxes.md, "Forking slots").

A forked run is a copy of the slot's zygote in fresh namespaces; nothing a program
leaves behind (files, environment, modules, threads, a daemon child) may reach
the next program on the same slot, each run has its own limits, an idle zygote
uses no CPU, and closing the sandbox (or its owner dying) leaves no process behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from argym.envs.code.grader import grade, grade_many
from argym.envs.code.tasks import code_task
from argym.envs.sandbox import Limits, Program
from argym.envs.sandbox.process import ProcessSandbox

TIMEOUT_S = 2.0
TASK = code_task(
    "add",
    'def add(a, b):\n    """Return a + b."""\n',
    "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n",
    "add",
    "    return a + b\n",
)
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"

MARK = "37.0123"
"""The left-behind daemon's argument: `sleep 37.0123`, found by its command line on the whole host."""

LEAVE = f"""
import os, sys, threading, time, types
open('/tmp/left-behind', 'w').write('x')
open('left-behind', 'w').write('x')
open('/dev/shm/left-behind', 'w').write('x')
for path in ('/left-behind', '/dev/left-behind'):  # read-only in a forked run: nothing to leave there
    try:
        open(path, 'w').write('x')
    except OSError:
        pass
os.environ['LEFT_BEHIND'] = '1'
sys.modules['left_behind'] = types.ModuleType('left_behind')
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/usr/bin/sleep', ['sleep', '{MARK}'])
    os._exit(0)
os.wait()
time.sleep(0.2)
"""

SEEN = f"""
import os, sys, threading
def seen():
    daemons = [p for p in os.listdir('/proc') if p.isdigit()
               and b'{MARK}' in open(f'/proc/{{p}}/cmdline', 'rb').read()]
    return {{'tmp': os.path.exists('/tmp/left-behind'), 'workdir': os.path.exists('left-behind'),
            'shm': os.path.exists('/dev/shm/left-behind'),
            'env': 'LEFT_BEHIND' in os.environ, 'module': 'left_behind' in sys.modules,
            'thread': threading.active_count() > 1, 'daemon': bool(daemons)}}
def anywhere():
    return {{'root': os.path.exists('/left-behind'), 'dev': os.path.exists('/dev/left-behind')}}
"""


def _answer(prelude: str, body: str) -> str:
    code = f"{prelude}\n{SEEN}\ndef add(a, b):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    return f"```python\n{code}```"


@pytest.fixture
def one_slot(require_backend, tmp_path: Path):
    require_backend("process")
    sb = ProcessSandbox(slots=1, limits=Limits(memory_mb=512, processes=48), tmp_dir=str(tmp_path))
    runs: list[dict] = []
    plain_run = sb.run

    def recording(*a, **k):
        r = plain_run(*a, **k)
        runs.append(r.meta)
        return r

    sb.run = recording  # type: ignore[method-assign]
    yield sb, runs
    sb.close()


def _host_daemons() -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and MARK.encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                out.append(int(p))
        except OSError:
            pass
    return out


def test_nothing_a_program_leaves_reaches_the_next_one_on_its_slot(one_slot) -> None:
    sb, runs = one_slot
    # the planting program sees its own leftovers (so the probe can see them) ...
    planted = grade(sb, TASK, _answer(LEAVE, "return a + b if all(seen().values()) else seen()"), TIMEOUT_S)
    assert planted["kind"] == "ok", planted
    assert sb.zygote_pids(0)
    assert not _host_daemons(), "the daemon outlived its run"
    # ... and the next program forked on the same slot sees none of them, nor anything written elsewhere
    probe = "v = {**seen(), **anywhere()}\nreturn a + b if not any(v.values()) else v"
    clean = grade(sb, TASK, _answer("", probe), TIMEOUT_S)
    assert clean["kind"] == "ok", clean
    assert [m["warm"] for m in runs] == [True, True], runs


def test_an_idle_zygote_uses_no_cpu_and_closing_kills_it(one_slot) -> None:
    sb, runs = one_slot
    assert grade(sb, TASK, GOOD, TIMEOUT_S)["kind"] == "ok"
    tree = sb.zygote_pids(0)
    assert len(tree) >= 2, tree  # bubblewrap and the zygote's interpreter, pid 1 of bubblewrap's namespace
    before = _cpu_ticks(tree)
    time.sleep(1.0)
    assert _cpu_ticks(tree) - before <= 1, "an idle zygote used CPU"
    assert all(_state(p) in "SZ" for p in tree), {p: _state(p) for p in tree}
    sb.close()
    time.sleep(0.2)
    assert not [p for p in tree if _state(p) not in ("Z", "gone")], "a warm process outlived close()"


def test_each_forked_run_has_its_own_limits_and_a_cold_run_stops_the_zygote(one_slot) -> None:
    sb, runs = one_slot
    show = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20, resource.getrlimit(0)[0])"
    small = sb.run(["python", "-c", show], limits=Limits(memory_mb=300, cpu_s=3), warm=True)
    zygote = sb.zygote_pids(0)
    large = sb.run(["python", "-c", show], limits=Limits(memory_mb=700, cpu_s=9), warm=True)
    assert (small.stdout, large.stdout) == ("300 3\n", "700 9\n"), (small, large)
    assert sb.zygote_pids(0) == zygote  # one zygote forked both
    # not warm: started cold, after the zygote was stopped (a cold run's end kills its slot uid's processes)
    assert sb.run(["python", "-c", "print(7)"]).stdout == "7\n"
    assert not [p for p in zygote if _state(p) not in ("Z", "gone")]
    assert (
        sb.run(["python", "-c", show], limits=Limits(memory_mb=300, cpu_s=3), warm=True).stdout == "300 3\n"
    )
    assert [m["warm"] for m in runs] == [True, True, False, True]


@pytest.mark.parametrize("end", ["exits", "killed"])
def test_an_owner_that_ends_without_closing_leaves_no_process(
    require_backend, tmp_path: Path, end: str
) -> None:
    """Exits: the finalizer stops the zygote. Killed (SIGKILL, a run in flight): the zygote sees its socket
    close and ends, the run in flight with it."""
    require_backend("process")
    sleeper = "```python\nimport time\ndef add(a, b):\n    time.sleep(60)\n```"
    code = (
        "import threading, time\nfrom argym.envs.code.grader import grade\n"
        "from argym.envs.code.tasks import code_task\nfrom argym.envs.sandbox.process import ProcessSandbox\n"
        f"TASK = code_task('add', {TASK.meta['stub']!r}, {TASK.tests!r}, 'add', 'return a + b')\n"
        f"sb = ProcessSandbox(slots=1, tmp_dir={str(tmp_path)!r})\n"
        f"assert grade(sb, TASK, {GOOD!r}, 2.0)['kind'] == 'ok'\n"
        + (
            f"threading.Thread(target=grade, args=(sb, TASK, {sleeper!r}, 90.0), daemon=True).start()\n"
            "time.sleep(1.0)\nprint(sb._tmp, *sb.zygote_pids(0), flush=True)\ntime.sleep(120)\n"
            if end == "killed"
            else "print(sb._tmp, *sb.zygote_pids(0), flush=True)\n"
        )
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    folder, *pids = owner.stdout.readline().split()  # type: ignore[union-attr]
    if end == "killed":
        assert len(pids) >= 5, pids  # bubblewrap, the zygote, the run's middle, its harness and candidate
        owner.kill()
    assert owner.wait(timeout=120) in (0, -9), owner.stderr.read()  # type: ignore[union-attr]
    assert len(pids) >= 2
    if end == "exits":
        assert not Path(folder).exists()
    end_by = time.monotonic() + 5
    while time.monotonic() < end_by and [p for p in map(int, pids) if _state(p) not in ("Z", "gone")]:
        time.sleep(0.1)
    assert not [p for p in map(int, pids) if _state(p) not in ("Z", "gone")]


def test_run_many_gives_the_sequential_results_in_order_and_keeps_every_slot_busy(require_backend) -> None:
    require_backend("process")
    with ProcessSandbox(slots=2) as sb:
        programs = [Program(["python", "-c", f"import time; time.sleep(1.0); print({i})"]) for i in range(4)]
        t = time.monotonic()
        many = sb.run_many(programs)
        wall = time.monotonic() - t
        one_by_one = [sb.run(p.argv) for p in programs]
        assert [r.stdout for r in many] == [r.stdout for r in one_by_one] == [f"{i}\n" for i in range(4)]
        assert wall < 3.5, f"4 programs of 1 s on 2 slots took {wall:.1f} s: the slots were not both busy"
        assert sorted(r.meta["slot"] for r in many) == [0, 0, 1, 1]


def test_grade_many_gives_the_verdicts_of_grade_in_order(require_backend) -> None:
    require_backend("process")
    wrong = "```python\ndef add(a, b):\n    return a - b\n```"
    items = [(TASK, GOOD), (TASK, ""), (TASK, wrong), (TASK, GOOD)]
    with ProcessSandbox(slots=2) as sb:
        many = grade_many(sb, items, TIMEOUT_S)
        one_by_one = [grade(sb, task, answer, TIMEOUT_S) for task, answer in items]
    key = [(v["kind"], v["passed"], v["failed"]) for v in many]  # type: ignore[index]
    assert key == [(v["kind"], v["passed"], v["failed"]) for v in one_by_one]
    assert key == [("ok", 2, 0), ("no_code", 0, 0), ("wrong_answer", 0, 2), ("ok", 2, 0)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "gone"


def _cpu_ticks(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except (OSError, IndexError):
            pass
    return total


def test_closing_a_code_env_stops_the_warm_runs_its_grading_started(one_slot) -> None:
    from argym.envs.code.env import CodeEnv

    sb, runs = one_slot
    env = CodeEnv(tasks=[TASK], sandbox=sb)
    env.reset(options={"task_id": TASK.id})
    assert env.step(GOOD)[1] == 1.0
    tree = sb.zygote_pids(0)
    assert tree
    env.close()  # the sandbox is shared and stays open; only its idle zygote goes
    assert not sb.zygote_pids(0)
    time.sleep(0.2)
    assert not [p for p in tree if _state(p) not in ("Z", "gone")]
    assert grade(sb, TASK, GOOD, TIMEOUT_S)["kind"] == "ok"  # the next program starts the slot's zygote again
    assert sb.zygote_pids(0)
