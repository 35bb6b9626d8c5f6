"""Warm slots of the process backend and `Sandbox.run_many` (issue 19; docs/sandboxes.md, "Warm slots").

A warm run is started on a slot before its program arrives; nothing a program
leaves behind (files, environment, modules, threads, a daemon child) may reach
the next program on the same slot, an idle warm run uses no CPU, and closing
the sandbox (or its owner dying) leaves no warm process behind.
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
            'env': 'LEFT_BEHIND' in os.environ, 'module': 'left_behind' in sys.modules,
            'thread': threading.active_count() > 1, 'daemon': bool(daemons)}}
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
    sb.settle()
    assert sb.warm_pids(0)
    assert not _host_daemons(), "the daemon outlived its run"
    # ... and the next program on the same slot, handed to the warm run, sees none of them
    clean = grade(sb, TASK, _answer("", "return a + b if not any(seen().values()) else seen()"), TIMEOUT_S)
    assert clean["kind"] == "ok", clean
    assert [m["warm"] for m in runs] == [False, True], runs


def test_a_warm_run_is_idle_until_its_program_comes_and_closing_kills_it(one_slot) -> None:
    sb, runs = one_slot
    assert grade(sb, TASK, GOOD, TIMEOUT_S)["kind"] == "ok"
    sb.settle()
    time.sleep(1.0)  # let the warm interpreters finish starting
    tree = sb.warm_pids(0)
    assert len(tree) >= 3, tree  # bubblewrap, the harness, the candidate's interpreter
    before = _cpu_ticks(tree)
    time.sleep(1.0)
    assert _cpu_ticks(tree) - before <= 1, "an idle warm slot used CPU"
    assert all(_state(p) in "SZ" for p in tree), {p: _state(p) for p in tree}
    sb.close()
    time.sleep(0.2)
    assert not [p for p in tree if _state(p) not in ("Z", "gone")], "a warm process outlived close()"


def test_a_program_of_other_limits_discards_the_warm_run(one_slot) -> None:
    sb, runs = one_slot
    assert grade(sb, TASK, GOOD, TIMEOUT_S)["kind"] == "ok"
    sb.settle()
    old = sb.warm_pids(0)
    assert grade(sb, TASK, GOOD, TIMEOUT_S + 1)["kind"] == "ok"  # other limits: started cold
    assert sb.run(["python", "-c", "print(7)"]).stdout == "7\n"  # not warm: the slot's warm run goes
    assert [m["warm"] for m in runs] == [False, False, False]
    assert not [p for p in old if _state(p) not in ("Z", "gone")]


def test_a_sandbox_never_closed_leaves_no_warm_process(require_backend, tmp_path: Path) -> None:
    require_backend("process")
    code = (
        "from argym.envs.code.grader import grade\nfrom argym.envs.code.tasks import code_task\n"
        "from argym.envs.sandbox.process import ProcessSandbox\n"
        f"TASK = code_task('add', {TASK.meta['stub']!r}, {TASK.tests!r}, 'add', 'return a + b')\n"
        f"sb = ProcessSandbox(slots=1, tmp_dir={str(tmp_path)!r})\n"
        f"assert grade(sb, TASK, {GOOD!r}, 2.0)['kind'] == 'ok'\nsb.settle()\n"
        "print(sb._tmp, *sb.warm_pids(0), flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    folder, *pids = out.stdout.split()
    assert len(pids) >= 1 and not Path(folder).exists()
    time.sleep(0.5)
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
    sb.settle()
    tree = sb.warm_pids(0)
    assert tree
    env.close()  # the sandbox is shared and stays open; only its idle warm run goes
    assert not sb.warm_pids(0)
    time.sleep(0.2)
    assert not [p for p in tree if _state(p) not in ("Z", "gone")]
    assert grade(sb, TASK, GOOD, TIMEOUT_S)["kind"] == "ok"  # the next program warms the slot again
    sb.settle()
    assert sb.warm_pids(0)
