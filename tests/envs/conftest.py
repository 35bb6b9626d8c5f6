"""Shared by the envs' tests: which sandbox backends can run here, and the training smoke test's loop."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def _docker_problem(image: str | None) -> str | None:
    """None if a Docker engine answers and has `image` (default: the sandbox image), else why not."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed (pip install 'argym[docker]')"
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        return f"no Docker engine answers at DOCKER_HOST={os.environ.get('DOCKER_HOST', '(default)')}: {e}"
    from argym.envs.sandbox.engine import IMAGE, image_exists

    if not image_exists(client, image or IMAGE):
        return (
            f"the image {image or IMAGE} is missing: run `argym sandbox build-image` (SWE: `--swe`) "
            f"or .ci/setup-docker.sh"
        )
    return None


def skip_or_fail(reason: str) -> None:
    """Skip where a sandbox cannot run; under CI=true a missing sandbox is a failure, never a skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the sandbox is unavailable: {reason}. .ci/setup-docker.sh sets it up.")
    pytest.skip(reason)


class Backends:
    """`require(backend, image=None)`: skip (or, in CI, fail) unless that sandbox backend can run here;
    `unavailable(reason)` for a sandbox that failed to start."""

    unavailable = staticmethod(skip_or_fail)

    def __call__(self, backend: str, image: str | None = None) -> None:
        if backend == "process" and shutil.which("bwrap") is None:
            skip_or_fail("bubblewrap is not installed (apt-get install bubblewrap)")
        if backend == "docker":
            why = _docker_problem(image)
            if why:
                skip_or_fail(why)


@pytest.fixture(scope="session")
def require_backend() -> Backends:
    return Backends()


@pytest.fixture
def fit_two_steps():
    """`run(cfg, prompt_marker)` trains `cfg` to its end and returns (trainer, trajectories, tokenizer).

    It checks what every env's smoke test needs: two steps of 2 tasks × 2 samples, no infra failure,
    the masks aligned with the tokens and covering policy tokens only (the prompt, recognised by
    `prompt_marker`, is never trained on), and a checkpoint written.
    """
    from argym.algorithms.trainer import Trainer

    def run(cfg, prompt_marker: str):
        trainer = Trainer(cfg)
        seen: list = []
        collect = trainer.collect

        def recording(*a, **k):
            trajs, m = collect(*a, **k)
            seen.extend(trajs)
            return trajs, m

        trainer.collect = recording
        try:
            trainer.fit()
        finally:
            trainer.close()
        assert trainer.step == 2 and len(seen) == 2 * 2 * 2
        tok = trainer.policy.tokenizer
        for t in seen:
            assert not t.infra_failure and len(t.token_ids) == len(t.loss_mask)
            assert sum(t.loss_mask) == t.num_policy_tokens > 0
            policy_text = tok.decode([i for i, m in zip(t.token_ids, t.loss_mask) if m])
            assert prompt_marker in tok.decode(t.token_ids) and prompt_marker not in policy_text
        assert (trainer.run_dir / "checkpoint").exists()
        return trainer, seen, tok

    return run


@pytest.fixture
def broken_bwrap_sandbox(require_backend):
    """A real process sandbox whose bubblewrap binary breaks after it started (what a lost or broken
    sandbox looks like to an env): `bwrap` then fails as bubblewrap itself does, before running anything."""
    import tempfile
    from pathlib import Path

    from argym.envs.sandbox.process import ProcessSandbox

    require_backend("process")
    sb = ProcessSandbox(slots=1)
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)  # the slot's uid runs it
        broken = Path(d) / "bwrap"
        broken.write_text(
            "#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"
        )
        broken.chmod(0o755)
        sb.bwrap = str(broken)
        yield sb
        sb.close()


_BWRAP_WRAPPER = """import os, sys
args = sys.argv[1:]
if {close}:  # the harness's report descriptor is closed: nothing can be written on it
    # (closed, not replaced by dup2: its number can be above the run's open-files limit when the test
    # process holds many descriptors, and dup2 cannot make a descriptor there)
    os.close(int(args[args.index("ARGYM_RESULT_FD") + 1]))
end = args.index("--")  # the extra mounts go last, over the sandbox's own
os.execv({real!r}, [{real!r}, *args[:end], *{extra!r}, *args[end:]])
"""


@pytest.fixture(params=["interpreter", "import", "channel", "candidate"])
def harness_fault_sandbox(request, require_backend, monkeypatch):
    """A real process sandbox whose bubblewrap works (it runs the command and reports its exit code) but in
    which the Code harness fails before the candidate's program could run: the interpreter exits at once
    (``interpreter``: /bin/false mounted over it), a stdlib module the harness imports raises ImportError
    (``import``), its report channel cannot be written (``channel``), or the candidate's interpreter
    cannot start (``candidate``: it is told to drop to a uid it may not take). Only the harness can tell
    these from the program's own failures. The first three break the slot's zygote too (it imports the
    same modules; the wrapper finds no channel to close), so those runs start cold; ``candidate`` goes
    through the zygote (the run's environment is the sandbox's `program_env`)."""
    import subprocess
    import tempfile
    from pathlib import Path

    from argym.envs.sandbox.process import ProcessSandbox

    require_backend("process")
    sb = ProcessSandbox(slots=1)
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)  # the slot's uid runs the wrapper and mounts what it names
        extra: list[str] = []
        if request.param == "interpreter":
            extra = ["--ro-bind", "/bin/false", sb.python]
        elif request.param == "import":
            found = subprocess.run(
                [sb.python, "-I", "-c", "import json; print(json.__file__)"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            broken = Path(d) / "json_init.py"
            broken.write_text("raise ImportError('json is broken in this sandbox')\n")
            broken.chmod(0o644)
            extra = ["--ro-bind", str(broken), found]
        elif request.param == "candidate":
            from argym.envs.sandbox import forking

            plain = forking.program_env
            monkeypatch.setattr(
                forking, "program_env", lambda e: {**plain(e), "ARGYM_CANDIDATE_UID": "99999"}
            )
        wrapper = Path(d) / "bwrap"
        wrapper.write_text(
            f"#!{sb.python} -I\n"
            + _BWRAP_WRAPPER.format(close=request.param == "channel", real=sb.bwrap, extra=extra)
        )
        wrapper.chmod(0o755)
        sb.bwrap = str(wrapper)
        yield sb
        sb.close()


def _serve_on_loopback(argv: Callable[[int], list[str]]):
    """Start ``argv(port)`` on a free loopback port and wait for its ``/health``; ``(process, url)``.
    A server that exits or stays silent for 60 s fails the test with its output."""
    import socket
    import subprocess
    import tempfile
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the server's log goes to a file: a pipe nobody reads fills up (64 KiB) and then blocks the server
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(argv(port), stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/health", timeout=2).read()
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                log.seek(0)
                pytest.fail(f"the server {argv(port)} did not start: {log.read()[-3000:]}")
            time.sleep(0.2)


def _stop(proc) -> None:
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def serve_on_loopback():
    """``serve_on_loopback(argv)``: a server process started by `_serve_on_loopback` (``argv(port)`` gives its
    command line); returns ``(process, url)``; every one started is stopped after the test."""
    started = []

    def start(argv):
        proc, url = _serve_on_loopback(argv)
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        _stop(proc)


GUESS_SERVER = Path(__file__).parent / "openenv" / "guess_server.py"
"""A small OpenEnv env written with openenv-core's server classes: ``python guess_server.py PORT``."""


@pytest.fixture(scope="session")
def openenv_server():
    """The URL of the guess server (`GUESS_SERVER`) served by openenv-core in a subprocess on loopback;
    stopped after the session."""
    import sys

    proc, url = _serve_on_loopback(lambda port: [sys.executable, str(GUESS_SERVER), str(port)])
    try:
        yield url
    finally:
        _stop(proc)
