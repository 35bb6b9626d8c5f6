"""The docker backend's pool of started containers: bounded, each container used for one answer and then
removed, nothing of one answer visible to the next, and a dead owner's pooled containers swept."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from argym.envs.sandbox import Limits

LEAVE_BEHIND = """
import os, subprocess, time
open('/tmp/left-by-the-last', 'w').write('x')
open('/sandbox/left-by-the-last', 'w').write('x')
if os.fork() == 0:  # a daemon of its own session, still running when the answer ends
    os.setsid()
    os.execvp('sleep', ['sleep', '300'])
time.sleep(0.2)
print('left')
"""

LOOK = """
import os
found = [d + '/' + n for d in ('/tmp', '/sandbox') for n in os.listdir(d)]
for p in os.listdir('/proc'):
    if p.isdigit():
        try:
            cmd = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')
        except OSError:
            continue
        if b'300' in cmd:  # the last answer's daemon
            found.append('process ' + p)
print(sorted(found))
"""


@pytest.fixture
def docker_sandbox(require_backend):
    """`make(slots, pool)`: docker sandboxes closed after the test."""
    require_backend("docker")
    from argym.envs.sandbox.docker import DockerSandbox

    made = []

    def make(slots: int, pool: int) -> DockerSandbox:
        made.append(DockerSandbox(slots=slots, pool=pool, limits=Limits(memory_mb=256, processes=32)))
        return made[-1]

    yield make
    for sb in made:
        sb.close()


def test_leftovers_of_an_answer_are_invisible_to_the_next(docker_sandbox) -> None:
    sb = docker_sandbox(1, 1)
    first = sb.run(["python", "-c", LEAVE_BEHIND])
    assert first.stdout.strip() == "left", first
    sb._run_pool.wait_ready(1)
    second = sb.run(["python", "-c", LOOK])
    assert second.exit_code == 0 and second.stdout.strip() == "[]", second
    assert first.meta["container"] != second.meta["container"]


def test_the_pool_is_bounded_and_its_containers_go_after_use_and_on_close(docker_sandbox) -> None:
    slots, size = 2, 2
    sb = docker_sandbox(slots, size)
    most, stop = [0], threading.Event()

    def watch() -> None:  # what the engine holds of this sandbox, while the runs go on
        while not stop.is_set():
            most[0] = max(most[0], len(sb.containers()))
            stop.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(4) as ex:  # more callers than slots
            results = list(ex.map(lambda i: sb.run(["python", "-c", f"print({i})"]), range(10)))
    finally:
        stop.set()
        watcher.join()
    assert [r.stdout.strip() for r in results] == [str(i) for i in range(10)]
    used = {r.meta["container"] for r in results}
    assert len(used) == 10  # each container served one answer
    assert 0 < most[0] <= slots + size and sb._run_pool.alive() <= slots + size
    assert sb.leftover_containers() == []  # used ones are removed ...
    assert (
        set(sb.containers()) == set(sb._run_pool.ready()) and len(sb.containers()) == size
    )  # ... the rest is ready
    sb.close()
    assert sb.containers() == []


def test_a_pool_of_zero_makes_each_container_on_demand(docker_sandbox) -> None:
    sb = docker_sandbox(1, 0)
    r = sb.run(["python", "-c", "print(7)"])
    assert r.stdout.strip() == "7" and sb._run_pool.ready() == []
    assert sb.containers() == []  # removed at once, nothing made ahead


DEAD_OWNER = """
import os
from argym.envs.sandbox.docker import DockerSandbox
sb = DockerSandbox(slots=1, pool=2)
sb.run(["python", "-c", "pass"])
assert sb._run_pool.wait_ready(2)
print(" ".join(sb._run_pool.ready()), flush=True)
os._exit(0)  # no exit hook runs
"""


def test_a_dead_owners_pooled_containers_are_swept(require_backend) -> None:
    require_backend("docker")
    from argym.envs.sandbox.docker import DockerSandbox

    out = subprocess.run(
        [sys.executable, "-c", DEAD_OWNER], capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ready = out.stdout.split()
    assert len(ready) == 2, out
    sb = DockerSandbox(slots=1, pool=0)  # a new sandbox on this machine sweeps them
    try:
        left = [c["Id"] for c in sb.client.api.containers(all=True) if c["Id"] in ready]
        assert left == [], f"a dead owner's ready containers survived the sweep: {left}"
    finally:
        sb.close()


def test_a_dropped_sandbox_takes_its_pooled_containers_with_it(require_backend) -> None:
    """The pools' threads hold no reference to the sandbox: dropped unclosed, it is collected and its ready
    containers (runs' and sessions') are removed."""
    require_backend("docker")
    import gc
    import weakref

    from argym.envs.sandbox.docker import DockerSandbox
    from argym.envs.sandbox.engine import IMAGE

    sb = DockerSandbox(slots=1, pool=1)
    client, owner = sb.client, sb._owner
    sb.run(["python", "-c", "pass"])
    sb.end_session(sb.start_session(image=IMAGE, pooled=True))
    assert sb._run_pool.wait_settled() and sb._session_pool.wait_settled()
    assert len(sb.containers()) == 2 and sb.leftover_containers() == []  # one ready per pool
    ref = weakref.ref(sb)
    del sb
    gc.collect()
    assert ref() is None
    assert client.api.containers(all=True, filters={"label": f"argym.sandbox.owner={owner}"}) == []
