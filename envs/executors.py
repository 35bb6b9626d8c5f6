"""Shared executors: process pools for work that must be killable.

Graders run candidate-controlled input through libraries that can hang
(sympy on ``9^{9^{9^{9}}}``), and math-verify's own SIGALRM timeouts only work
in a main thread. So graders run in worker processes, each the main thread
of its own process, and the parent enforces a hard wall-clock deadline by
killing the worker (without one, a hung verify holds a reward worker for good:
inclusionAI/AReaL issue 1426). The rollout engine builds one `Executors` and
hands it to every env, so 256 live episodes share one pool instead of
starting 256; an env made on its own builds and closes its own
(docs/design.md, "Who owns executors and sandboxes").

A worker is a fresh interpreter (like multiprocessing's spawn) started with
`subprocess` and talking over a socket-pair `Connection`, not a
`multiprocessing.Process`: spawn re-imports the caller's ``__main__`` in every
worker, which fails in a script without an ``if __name__ == "__main__"``
guard and imports whatever (torch, a model) that script imports at top level.
"""

from __future__ import annotations

import importlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from argym.envs.sandbox.base import Sandbox, make_sandbox
from argym.errors import ArgymError, InfrastructureError
from argym.registry import Registry

_STARTUP_S = 120.0  # a worker that cannot import its function in this long is a harness fault


class DeadlineExceeded(ArgymError, TimeoutError):
    """A job ran past the pool's deadline; its worker was killed and will be replaced."""


def _resolve(fn_path: str) -> Any:
    module, _, qualname = fn_path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _worker_main(fd: int) -> None:
    """Entry point of a worker process: receive args, send back (ok, result or traceback text)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    fn_path, warmup = conn.recv()
    fn = _resolve(fn_path)
    if warmup is not None:  # pay lazy imports before the first deadline starts
        fn(*warmup)
    conn.send((True, "ready"))
    while True:
        try:
            args = conn.recv()
        except (EOFError, OSError):  # the parent closed the pipe or exited
            return
        try:
            conn.send((True, fn(*args)))
        except Exception:
            conn.send((False, traceback.format_exc(limit=5)))


class _Worker:
    def __init__(self, fn_path: str, warmup: tuple | None):
        mine, theirs = socket.socketpair()
        code = f"from argym.envs.executors import _worker_main; _worker_main({theirs.fileno()})"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # import what we can
        with theirs:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env
            )
        self.conn = Connection(mine.detach())
        self.conn.send((fn_path, warmup))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=5)
        self.conn.close()


def _kill_all(workers: set[_Worker]) -> None:
    for w in list(workers):
        w.kill()
    workers.clear()


class WorkerPool:
    """`workers` processes running ``module:qualname``; `call` is thread-safe.

    Workers start lazily. The idle stack holds started workers and free slots
    (None): a caller pops one, starting a worker in a free slot, so a killed
    worker's slot is refilled by the next caller and no waiter is stranded.
    """

    def __init__(self, fn_path: str, workers: int = 2, deadline_s: float = 5.0, warmup: tuple | None = None):
        if ":" not in fn_path or workers < 1 or deadline_s <= 0:
            raise ValueError(
                f"WorkerPool needs fn_path 'module:qualname', workers >= 1 and deadline_s > 0; "
                f"got {fn_path!r}, {workers}, {deadline_s}."
            )
        self.fn_path, self.workers, self.deadline_s, self.warmup = fn_path, workers, deadline_s, warmup
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        for _ in range(workers):
            self._idle.put(None)
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _kill_all, self._all)  # also runs at interpreter exit

    def call(self, *args: Any, deadline_s: float | None = None) -> Any:
        """Run the function on `args` in a worker; `DeadlineExceeded` past the deadline
        (the pool's, or `deadline_s` for this call).

        Raises `InfrastructureError` if the worker dies or the function raises.
        """
        deadline = self.deadline_s if deadline_s is None else deadline_s
        w = self._checkout()
        try:
            w.conn.send(args)
            done = w.conn.poll(deadline)  # also True on EOF: recv then raises
            if done:
                ok, value = w.conn.recv()
        except (EOFError, OSError) as e:
            self._discard(w)
            raise InfrastructureError(
                f"A worker running {self.fn_path} died ({type(e).__name__}); it will be replaced."
            ) from e
        except BaseException:
            self._discard(w)  # e.g. KeyboardInterrupt mid-job: the worker's state is unknown
            raise
        if not done:
            self._discard(w)
            raise DeadlineExceeded(
                f"{self.fn_path} ran past its {deadline:g} s deadline; the worker was killed."
            )
        self._release(w)
        if not ok:
            raise InfrastructureError(f"{self.fn_path} raised in its worker:\n{value}")
        return value

    def _checkout(self) -> _Worker:
        w = self._idle.get()
        if self._closed:
            self._idle.put(w)
            raise RuntimeError(f"WorkerPool({self.fn_path}) is closed.")
        if w is not None:
            return w
        try:
            w = _Worker(self.fn_path, self.warmup)
            with self._lock:
                self._all.add(w)
            if not w.conn.poll(_STARTUP_S):
                raise InfrastructureError(f"A worker for {self.fn_path} did not start in {_STARTUP_S:g} s.")
            w.conn.recv()  # "ready", or EOF if it died importing the function
            return w
        except BaseException as e:
            self._discard(w)
            if isinstance(e, (EOFError, OSError)):
                raise InfrastructureError(
                    f"A worker for {self.fn_path} failed to start (its traceback is on stderr)."
                ) from e
            raise

    def _release(self, w: _Worker) -> None:
        if self._closed:
            self._discard(w)
        else:
            self._idle.put(w)

    def _discard(self, w: _Worker | None) -> None:
        """Kill `w` (if any) and free its slot for a replacement."""
        if w is not None:
            with self._lock:
                self._all.discard(w)
            w.kill()
        self._idle.put(None)

    def close(self) -> None:
        """Kill every worker; calls after this raise."""
        self._closed = True
        with self._lock:
            _kill_all(self._all)
        for _ in range(self.workers):  # wake any waiter so it sees the pool is closed
            self._idle.put(None)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


POOLS: Registry[Callable[..., WorkerPool]] = Registry(
    "worker pool", {"verifier": "argym.envs.math.verifier", "tools": "argym.envs.toolcall.tools"}
)
"""Name → builder of a worker pool that the envs of a family share (``verifier``, ``tools``): the family's
module registers it with `@register_pool(name)`, and `Executors.pool(name)` builds it on first use, importing
argym's own family's module first (a process that made no Math env has not imported its verifier)."""
register_pool = POOLS.register


class Executors:
    """The worker pools and sandboxes a set of envs shares, and the one place that closes them.

    Whoever builds an `Executors` owns it. The rollout engine builds one, hands it to
    every env it makes (`executors=`) and closes it with itself; an env made without
    one builds its own and closes it in `env.close()`. So two engines never share a
    pool, and closing one leaves the other's running. Each resource is built on
    first use (`shared`) and released by `close()`; after `close()` the next use
    builds a fresh one. A pool or sandbox handed to the constructor stays its
    caller's: it is used, never closed here.
    """

    def __init__(
        self,
        verifier: WorkerPool | None = None,
        sandbox: Sandbox | None = None,
        tools: WorkerPool | None = None,
    ):
        self._given_pools = {"verifier": verifier, "tools": tools}
        self._given_sandbox = sandbox
        self._built: dict[str, Any] = {}
        self._lock = threading.Lock()

    def shared(self, key: str, build: Callable[[], Any]) -> Any:
        """The resource named `key`, built by `build()` on first use; `close()` closes it."""
        with self._lock:
            if key not in self._built:
                self._built[key] = build()
            return self._built[key]

    def pool(self, name: str) -> WorkerPool:
        """The worker pool `name`: the one handed to the constructor, else built on first use by the
        builder its family registered (`POOLS`)."""
        given = self._given_pools.get(name)
        if given is not None:
            return given
        pool: WorkerPool = self.shared(name, POOLS.get(name))
        return pool

    @property
    def verifier(self) -> WorkerPool:
        """The Math env's grader pool (``verifier``, built by `argym.envs.math.verifier.verifier_pool`)."""
        return self.pool("verifier")

    @property
    def tools(self) -> WorkerPool:
        """ToolCall's stateless tools' pool (``tools``, built by `argym.envs.toolcall.tools.tool_pool`)."""
        return self.pool("tools")

    def sandbox_for(self, spec: str | Sandbox) -> Sandbox:
        """The sandbox a code env's episodes run in: the one handed to the
        constructor, else `spec` itself if it is a sandbox, else one of backend `spec` (``process``,
        ``process-weak``, ``docker``) built on first use."""
        if self._given_sandbox is not None:
            return self._given_sandbox
        if isinstance(spec, Sandbox):
            return spec
        backend = str(spec)
        return self.shared(f"sandbox/{backend}", lambda: make_sandbox(backend))

    def close(self) -> None:
        """Close everything built here (newest first); what was handed in is left to its owner."""
        with self._lock:
            built, self._built = list(self._built.values()), {}
        errors = []
        for resource in reversed(built):
            try:
                resource.close()
            except Exception as e:  # close the rest before saying so
                errors.append(e)
        if errors:
            raise errors[0]

    def __deepcopy__(self, memo: dict[int, Any]) -> Executors:
        """A handle, not a value: a copy names the same pools (gymnasium deep-copies an env's spec,
        whose kwargs hold the executors an engine handed in)."""
        return self

    def __enter__(self) -> Executors:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
