"""SWE docker containers do not outlive their owner: an env dropped unclosed takes its container with it (garbage
collection, interpreter exit), and one whose process died without any exit hook (``os._exit``, SIGKILL) is
removed when the next docker sandbox starts on this machine, while a live owner's containers are left alone."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import argym

SCRIPT = """import os, sys, argym
env = argym.make("argym/SWE-v0", split="all", sandbox="docker").unwrapped
env.reset(seed=0)
print(env._ws.box.id, flush=True)
if sys.argv[1] == "crash":
    os._exit(0)
"""


def _exists(client, cid: str) -> bool:
    import docker

    try:
        client.containers.get(cid)
        return True
    except docker.errors.NotFound:
        return False


def _owner_leaves(mode: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()[-1]


def test_an_unclosed_envs_containers_are_removed(need) -> None:
    need("docker")
    from argym.envs.sandbox.docker import DockerSandbox
    from argym.envs.swe.workspace import SWE_IMAGE

    env = argym.make("argym/SWE-v0", split="all", sandbox="docker").unwrapped
    env.reset(seed=0)
    box, client = env._ws.box, env.sandbox.client
    assert _exists(client, box.id)
    del env
    gc.collect()  # dropped, never closed
    assert not _exists(client, box.id)

    at_exit = _owner_leaves("exit")  # the interpreter exits without closing the env
    crashed = _owner_leaves("crash")  # no exit hook runs at all
    assert not _exists(client, at_exit) and _exists(client, crashed)
    live = DockerSandbox(image=SWE_IMAGE)
    try:
        mine = live.start_session(image=SWE_IMAGE)
        other = DockerSandbox(
            image=SWE_IMAGE
        )  # the next start on this machine reaps the dead owner's container
        other.close()
        assert not _exists(client, crashed) and _exists(client, mine.id)  # ... and never a live owner's
    finally:
        live.close()
    assert not _exists(client, mine.id)


def test_a_forked_childs_exit_hooks_leave_the_parents_containers(need) -> None:
    need("docker")
    from argym.envs.sandbox.docker import DockerSandbox
    from argym.envs.swe.workspace import SWE_IMAGE

    sandbox = DockerSandbox(image=SWE_IMAGE)
    try:
        box = sandbox.start_session(image=SWE_IMAGE)
        pid = os.fork()
        if pid == 0:  # the child runs the exit hooks it inherited, as a child that exits normally would
            try:
                sandbox._finalizer()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert _exists(sandbox.client, box.id)
    finally:
        sandbox.close()
    assert not _exists(sandbox.client, box.id)


def test_sandbox_cleanup_leaves_live_runs_containers(need) -> None:
    need(
        "docker"
    )  # on an engine shared by several users, `argym sandbox cleanup` removed their live containers
    from argym.envs.sandbox.docker import DockerSandbox
    from argym.envs.swe.workspace import SWE_IMAGE

    sandbox = DockerSandbox(image=SWE_IMAGE)
    try:
        box = sandbox.start_session(image=SWE_IMAGE)
        out = subprocess.run(
            [sys.executable, "-m", "argym.cli", "sandbox", "cleanup"],
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ,
        )
        assert out.returncode == 0 and out.stdout.startswith("removed "), out.stderr[-2000:]
        assert _exists(sandbox.client, box.id)
    finally:
        sandbox.close()


def test_the_next_episodes_container_is_made_before_its_reset(need) -> None:
    """reset takes a container started in the background (no create or start on its path), and the one it
    replaces is removed."""
    need("docker")
    env = argym.make("argym/SWE-v0", split="all", sandbox="docker").unwrapped
    try:
        env.reset(seed=0)
        pool, client = env.sandbox._session_pool, env.sandbox.client
        assert pool.wait_ready(1)
        ready, first = set(pool.ready()), env._ws.box.id
        assert ready and first not in ready
        env.reset(seed=1)
        assert env._ws.box.id in ready  # made before the reset was asked for
        assert pool.wait_settled() and not _exists(client, first)  # the last episode's container is gone
        r = env._ws.shell(
            "git -C /testbed status --short | wc -l; "
            'test "$(git --git-dir=/opt/argym/base.git rev-parse HEAD)" = "$(git rev-parse HEAD)" && echo same'
        )
        assert r.exit_code == 0 and r.stdout.split() == ["0", "same"], r  # a clean copy, and the base's git
    finally:
        env.close()
