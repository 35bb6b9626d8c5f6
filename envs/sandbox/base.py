"""The `Sandbox` interface: run untrusted programs and get back what they did.

One interface, several backends (docs/design.md, "Sandboxes";
docs/sandboxes.md): `ProcessSandbox` (namespaces + rlimits + a
per-slot uid, no daemon) and `DockerSandbox` (one container per session).
A sandbox is a pool of slots; `run` takes a free slot for its duration, so
one sandbox is shared by every live episode (the rollout engine owns it).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from argym.errors import ArgymError, InfrastructureError
from argym.registry import Registry


class SandboxUnavailable(ArgymError, RuntimeError):
    """The isolation a sandbox needs is missing; the message says how to get it."""


class SandboxError(InfrastructureError):
    """The sandbox itself failed (could not start, lost its container): a harness fault."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run; every field is enforced by each backend."""

    timeout_s: float = 10.0
    """wall-clock seconds before the whole process tree is killed"""
    cpu_s: int | None = None
    """CPU seconds per process (RLIMIT_CPU, soft = hard); default: timeout_s + 1"""
    memory_mb: int = 1024
    """memory of the run's whole process tree (a cgroup; docker: the container) and address space per
    process (RLIMIT_AS); where no cgroup can be made, per process only (docs/sandboxes.md)"""
    processes: int = 64
    """processes of the slot's user (RLIMIT_NPROC) and of the run's cgroup, pids limit for docker"""
    file_size_mb: int = 16
    """largest file the program may write (RLIMIT_FSIZE)"""
    open_files: int = 256
    """open descriptors per process (RLIMIT_NOFILE)"""
    disk_mb: int = 64
    """size of the writable work dir and /tmp (tmpfs: writes past it fail while they happen)"""
    output_bytes: int = 1 << 20
    """stdout and stderr are each capped at this; the run is killed when one overflows"""

    def with_(self, **kw: Any) -> Limits:
        return replace(self, **kw)


def program_env(extra: dict[str, str] | None) -> dict[str, str]:
    """The whole environment a program sees: a fixed minimum, plus `extra` (the host's is never passed)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/sandbox",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }
    env.update(extra or {})
    return env


@dataclass
class ExecResult:
    """What one run did. `result` is the verdict channel (descriptor 3), None unless requested."""

    stdout: str
    stderr: str
    exit_code: int | None
    signal: int | None = None
    timed_out: bool = False
    oom: bool = False
    output_truncated: bool = False
    wall_s: float = 0.0
    result: bytes | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Program:
    """One call of `Sandbox.run`, for `Sandbox.run_many`; the fields are `run`'s arguments."""

    argv: list[str]
    stdin: bytes | None = None
    files: dict[str, bytes | str] | None = None
    limits: Limits | None = None
    result_channel: bool = False
    warm: bool = False


class Sandbox(ABC):
    """Runs programs in isolation. Thread-safe; `run` blocks while all slots are busy."""

    backend: str = "?"
    limits: Limits = Limits()
    slots: int = 1
    """how many programs run at once"""

    @abstractmethod
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
        """Run `argv` (``python`` means the sandbox's interpreter) in a fresh work dir holding `files`.

        `stdin` is fed to the program then closed (no stdin: end of file). With
        `result_channel`, descriptor 3 is a pipe whose contents come back as
        `ExecResult.result`; whoever writes it must keep it from the code it runs.
        `warm` says that `argv` is a trusted program (such as the Code env's
        harness, the untrusted part coming on stdin) that a backend may start
        from a process kept ready: the process backend forks a ``python -c``
        program from its slot's zygote (docs/sandboxes.md, "Forking slots");
        others ignore it. Raises `SandboxError` only for harness faults; whatever
        the program does (hang, crash, flood) is reported in the `ExecResult`.
        """

    def run_many(self, programs: Sequence[Program]) -> list[ExecResult | SandboxError]:
        """Run every program, up to `slots` at once, so no slot idles while one is waiting; the results
        in the order of `programs`. A program the sandbox failed gets its `SandboxError` in its place
        (that program's infrastructure fault), so one fault loses none of the other results."""

        def one(p: Program) -> ExecResult | SandboxError:
            try:
                return self.run(
                    p.argv,
                    stdin=p.stdin,
                    files=p.files,
                    limits=p.limits,
                    result_channel=p.result_channel,
                    warm=p.warm,
                )
            except SandboxError as e:
                return e

        if not programs:
            return []
        with ThreadPoolExecutor(max_workers=min(self.slots, len(programs))) as pool:
            return list(pool.map(one, programs))

    def cool(self) -> None:
        """Stop whatever the sandbox keeps started ahead of demand (zygotes) until the next program
        asks for it; its owner is going idle. Nothing to stop by default."""

    def close(self) -> None:
        """Release slots, work dirs and containers."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")


def clean_output(data: bytes) -> str:
    """Decode program output for display: invalid UTF-8 replaced, NUL and terminal escapes removed."""
    return _ANSI.sub("", data.decode("utf-8", errors="replace").replace("\x00", ""))


SANDBOX_BACKENDS: Registry[Callable[..., Sandbox]] = Registry(
    "sandbox backend", dict.fromkeys(("process", "process-weak", "docker"), "argym.envs.sandbox.backends")
)
"""Backend name → factory `(**kwargs) -> Sandbox`; `@register_sandbox_backend("mine")` adds one (argym's own
are in `argym.envs.sandbox.backends`)."""
register_sandbox_backend = SANDBOX_BACKENDS.register

SandboxName = Annotated[str, SANDBOX_BACKENDS]
"""An env kwarg naming a backend: `argym.make` refuses an unknown name (``sandbox=dockr``) before the
env is built, and `argym envs ID` lists the names."""


def make_sandbox(backend: str = "process", **kwargs: Any) -> Sandbox:
    """A sandbox by backend name (`SANDBOX_BACKENDS`): ``process`` (default), ``process-weak`` (no bubblewrap),
    ``docker`` or a registered one."""
    return SANDBOX_BACKENDS.get(backend)(**kwargs)
