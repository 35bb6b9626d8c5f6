"""`DockerSandbox`: untrusted programs in throwaway containers on a Docker engine (``argym[docker]``).

One container per run (a grading session runs all of a task's tests in it,
never one container per test): ``network_mode="none"``, memory, CPU and pids
limits, ``cap_drop=["ALL"]`` (plus SETUID/SETGID/KILL, which the harness, root
inside, needs to start the candidate as ``nobody`` and to kill it),
``no-new-privileges``, a read-only root with size-capped tmpfs at ``/sandbox``
and ``/tmp``, an init process, rlimits. Commands run with ``timeout -s KILL``
inside and a host-side timer that kills the container; output is streamed
and capped. Containers are made and started ahead of demand and removed after use by a
`ContainerPool` (`pool=`; docs/sandboxes.md, "Container pools"), each used for one run or one
session only. Containers carry the label ``argym.sandbox`` and their owning
process (``argym.sandbox.process``: host, boot, pid, start time). A sandbox
removes its containers when it is closed, garbage-collected or the
interpreter exits, and on start `reap_orphans` removes those whose owner on
this machine is gone (killed, ``os._exit``); so does `cleanup` (``argym
sandbox cleanup``; ``--all`` removes every labelled container, live runs'
too, which on a shared engine are other users').

The verdict channel (``result_channel=True``) is the command's stdout; the
code the command runs must send everything else to stderr (the Python
harness relays the candidate's output there), and the candidate runs as
another uid that cannot read the harness's job, memory or environment.
"""

from __future__ import annotations

import base64
import os
import queue
import threading
import time
import weakref
from typing import Any

from argym.envs.sandbox.base import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
    clean_output,
    program_env,
)
from argym.envs.sandbox.engine import (
    IMAGE,
    LABEL,
    NOBODY,
    client_from_env,
    image_exists,
    listed,
    process_tag,
    reap_orphans,
    run_box,
    session_box,
    shutdown,
)
from argym.envs.sandbox.pool import ContainerPool

_ENV_CHUNK = 100_000  # one environment string may hold at most 128 KiB
# Where the harness, root in the container, reads the container's OOM-kill count (cgroup v2, then v1; the
# engine mounts the container's own cgroup there), so that a memory kill is never taken for a timeout.
MEMORY_EVENTS = "/sys/fs/cgroup/memory.events:/sys/fs/cgroup/memory/memory.oom_control"


class DockerSandbox(Sandbox):
    """`slots` concurrent containers at most; see the module docstring."""

    backend = "docker"

    def __init__(
        self,
        slots: int = 2,
        limits: Limits | None = None,
        image: str = IMAGE,
        client: Any = None,
        pool: int | None = None,
    ):
        """`pool`: started containers kept ready per kind (runs, sessions), made in the background so that
        a run or a workspace does not wait for a container create and start (default: `slots`; 0: none).
        Each is used once and removed (`argym.envs.sandbox.pool`)."""
        self.limits = limits or Limits()
        self.slots = slots
        self.client = client or client_from_env()
        self.image = image
        if not image_exists(self.client, image):
            raise SandboxUnavailable(
                f"The sandbox image {image!r} does not exist: build it with "
                f"`argym sandbox build-image` (or `source .ci/setup-docker.sh`)."
            )
        self._slots: queue.Queue[int] = queue.Queue()
        for i in range(slots):
            self._slots.put(i)
        self._owner = f"{os.getpid()}-{id(self)}"
        self._labels = {
            LABEL: "1",
            f"{LABEL}.owner": self._owner,
            f"{LABEL}.process": process_tag(os.getpid()) or "",
        }
        reap_orphans(self.client)
        size = slots if pool is None else pool
        # runs: at most `slots` in use plus `size` ready or being removed; sessions are long-lived (a
        # workspace each), so only their ready ones are bounded
        self._run_pool = ContainerPool(size, threads=max(2, slots), bound=slots + size if size else None)
        self._session_pool = ContainerPool(size, threads=2)
        # an env that is never closed still takes its containers with it (at garbage collection or at exit)
        self._finalizer = weakref.finalize(
            self, shutdown, self.client, self._owner, (self._run_pool, self._session_pool)
        )

    def containers(self) -> list[str]:
        """Ids of every container of this sandbox the engine holds: in use, ready in a pool, or being removed."""
        return [c["Id"] for c in listed(self.client, f"{LABEL}.owner={self._owner}")]

    def leftover_containers(self) -> list[str]:
        """Containers that runs or sessions left behind: once the pools' background work is done, every
        container of this sandbox except the pools' ready (never used) ones."""
        for p in (self._run_pool, self._session_pool):
            p.wait_settled()
        ready = set(self._run_pool.ready()) | set(self._session_pool.ready())
        return [c for c in self.containers() if c not in ready]

    def run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        files: dict[str, bytes | str] | None = None,
        limits: Limits | None = None,
        result_channel: bool = False,
        warm: bool = False,
    ) -> ExecResult:
        limits = limits or self.limits
        slot = self._slots.get()
        try:
            return self._run(argv, stdin, files, limits, result_channel)
        finally:
            self._slots.put(slot)

    def _run(
        self,
        argv: list[str],
        stdin: bytes | None,
        files: dict[str, bytes | str] | None,
        limits: Limits,
        result_channel: bool,
    ) -> ExecResult:
        cpu = limits.cpu_s or int(limits.timeout_s) + 1
        spec = (
            self.image,
            limits.memory_mb,
            limits.processes,
            limits.disk_mb,
            limits.file_size_mb,
            limits.open_files,
            cpu,
        )
        client, image, labels = self.client, self.image, self._labels  # the pool must not hold the sandbox
        box = self._run_pool.take(spec, lambda: run_box(client, image, labels, limits, cpu))
        start = time.monotonic()
        try:
            if files:
                self._put_files(box, files)
            env = program_env(None)
            user = "0" if result_channel else str(NOBODY)
            if result_channel:
                env.update(
                    ARGYM_RESULT_FD="1",
                    ARGYM_CANDIDATE_UID=str(NOBODY),
                    ARGYM_OUTPUT_CAP=str(limits.output_bytes // 2),
                    ARGYM_MEMORY_EVENTS=MEMORY_EVENTS,
                )
            argv = ["python3", "-I", "-S", *argv[1:]] if argv[0] == "python" else list(argv)
            if stdin and not result_channel:  # exec_run has no stdin: pipe it in from the environment
                env["ARGYM_STDIN"] = base64.b64encode(stdin).decode()
                argv = ["sh", "-c", 'printf %s "$ARGYM_STDIN" | base64 -d | "$@"', "sh", *argv]
            elif stdin:  # the harness's job travels in root-only environment variables
                data = base64.b64encode(stdin).decode()
                chunks = [data[i : i + _ENV_CHUNK] for i in range(0, len(data), _ENV_CHUNK)] or [""]
                env["ARGYM_JOB_PARTS"] = str(len(chunks))
                env.update({f"ARGYM_JOB_{i}": c for i, c in enumerate(chunks)})
            cmd = ["timeout", "-s", "KILL", f"{limits.timeout_s:g}", *argv]
            result = self._exec(box, cmd, env, user, limits, result_channel, start)
            result.meta["container"] = box.id
            return result
        finally:
            self._run_pool.discard(box)  # removed in the background, never used again

    def start_session(
        self,
        limits: Limits | None = None,
        image: str | None = None,
        workdir: str = "/testbed",
        tmp_mb: int = 256,
        workdir_mb: int | None = None,
        pooled: bool = False,
    ) -> Any:
        """A long-lived container for a multi-command session (SWE workspaces), labelled like `run`'s.

        With `workdir_mb`, `workdir` is a volume on a tmpfs of that size (the engine's
        writable layer has no size bound on most storage drivers), so a command cannot
        write past it while it runs. It starts empty (the engine copies no image
        content into a tmpfs volume), goes with the container (``remove(v=True)``),
        and its pages count towards the container's memory limit.

        The same confinement as `run` (no network, memory/CPU/pids limits, only KILL,
        SETUID and SETGID kept, no-new-privileges, an init, rlimits) but a writable
        root filesystem, so that files can be copied into `workdir` and the container
        can be committed as a snapshot; commands run as an unprivileged uid (`exec_in`'s
        `user`, the caller's files in `workdir` and the size-capped ``/tmp`` only); its
        processes are capped by an nproc rlimit below the pids limit, so `kill_user`
        can always start. The caller removes it (``remove(force=True, v=True)``; a `pooled` one with
        `end_session`).

        `pooled`: take a ready container from the session pool and keep the pool filled with this
        configuration (for sessions whose next one is alike, e.g. every shipped SWE instance runs
        in the same image; not for a per-instance image, whose ready containers would be wasted).
        """
        limits, image = limits or self.limits, image or self.image
        client, labels, owner = self.client, self._labels, self._owner  # the pool must not hold the sandbox

        def make() -> Any:
            return session_box(client, labels, owner, limits, image, workdir, tmp_mb, workdir_mb)

        if not pooled:
            return make()
        return self._session_pool.take((image, limits, workdir, tmp_mb, workdir_mb), make)

    def end_session(self, box: Any) -> None:
        """Remove a `pooled` session's container (and its work-dir volume) in the background."""
        self._session_pool.discard(box)

    def exec_in(
        self,
        box: Any,
        argv: list[str],
        *,
        user: str = str(NOBODY),
        workdir: str = "/testbed",
        env: dict[str, str] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run `argv` in a session container under ``timeout -s KILL``, output streamed and capped as in `run`."""
        limits = limits or self.limits
        base = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
        }
        base.update(env or {})
        cmd = ["timeout", "-s", "KILL", f"{limits.timeout_s:g}", *argv]
        return self._exec(
            box,
            cmd,
            base,
            user,
            limits,
            False,
            time.monotonic(),
            workdir=workdir,
            on_kill=lambda: self.kill_user(box, user),
        )

    def kill_user(self, box: Any, user: str = str(NOBODY)) -> None:
        """SIGKILL every process of `user` in a session container (commands and the daemons they left)."""
        if user == "0":
            box.kill()
            return
        script = (
            "import os,signal\nfor _ in range(50):\n n=0\n for p in os.listdir('/proc'):\n  if p.isdigit():\n"
            f"   try:\n    if os.stat('/proc/'+p).st_uid=={int(user)}: os.kill(int(p),signal.SIGKILL); n+=1\n"
            "   except OSError: pass\n if not n: break\n"
        )  # again until none is left: a fork loop respawns
        try:
            box.exec_run(["timeout", "-s", "KILL", "10", "python3", "-I", "-S", "-c", script], user="0")
        except Exception:
            box.kill()

    def _put_files(self, box: Any, files: dict[str, bytes | str]) -> None:
        for name, data in files.items():
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"file names must be plain names, got {name!r}")
            raw = data.encode() if isinstance(data, str) else data
            box.exec_run(
                [
                    "python3",
                    "-I",
                    "-S",
                    "-c",
                    f"import base64,os;open('/sandbox/{name}','wb').write(base64.b64decode(os.environ['D']))",
                ],
                user=str(NOBODY),
                environment={"D": base64.b64encode(raw).decode()},
            )

    def _exec(
        self,
        box: Any,
        cmd: list[str],
        env: dict[str, str],
        user: str,
        limits: Limits,
        result_channel: bool,
        start: float,
        workdir: str = "/sandbox",
        on_kill: Any = None,
    ) -> ExecResult:
        api = self.client.api
        exec_id = api.exec_create(box.id, cmd, environment=env, user=user, workdir=workdir)["Id"]
        out, err = bytearray(), bytearray()
        state = {"overflow": False, "timed_out": False}
        cap_out = (1 << 20) if result_channel else limits.output_bytes

        def kill() -> None:
            try:
                (on_kill or box.kill)()
            except Exception:
                pass

        def time_out() -> None:
            state["timed_out"] = True
            kill()

        timer = threading.Timer(limits.timeout_s + 2.0, time_out)
        timer.start()
        stream = None
        try:
            stream = api.exec_start(exec_id, stream=True, demux=True)
            for o, e in stream:
                for buf, chunk, cap in ((out, o, cap_out), (err, e, limits.output_bytes)):
                    if chunk:
                        room = cap - len(buf)
                        buf += chunk[: max(room, 0)]
                        if len(chunk) > room and not state["overflow"]:
                            state["overflow"] = True
                            if on_kill is None:
                                kill()
                if state["overflow"]:
                    break
        except Exception as e:
            if not (state["overflow"] or state["timed_out"]):
                raise SandboxError(f"lost the sandbox container: {e}") from e
        finally:
            timer.cancel()
            if state["overflow"] and on_kill is not None:  # a session: stop reading first, then kill
                if stream is not None:
                    try:
                        stream.close()
                    except Exception:
                        pass
                kill()
        wall = time.monotonic() - start
        code = None
        try:
            code = api.exec_inspect(exec_id).get("ExitCode")
        except Exception:
            pass
        timed_out = state["timed_out"] or (code in (124, 137) and wall >= limits.timeout_s * 0.95)
        stderr = clean_output(bytes(err))
        return ExecResult(
            stdout="" if result_channel else clean_output(bytes(out)),
            stderr=stderr,
            exit_code=code if code is not None and code < 128 else None,
            signal=code - 128 if code is not None and code >= 128 else None,
            timed_out=timed_out,
            oom="MemoryError" in stderr[-2000:],
            output_truncated=state["overflow"],
            wall_s=wall,
            result=bytes(out) if result_channel else None,
        )

    def close(self) -> None:
        self._finalizer()
