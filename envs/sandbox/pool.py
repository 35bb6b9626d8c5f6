"""`ContainerPool`: started containers made ahead of demand, each handed out once, then removed.

Creating and starting a container costs the engine a few hundred milliseconds; removing one
costs about as much. A pool moves both off the caller's path: background threads keep up to
`size` started containers of the current configuration ready (they run ``sleep infinity``:
an idle pool costs no CPU, and its threads block on a condition, never poll), and a used
container goes back to the pool only to be removed, never handed out again. Nothing of one
answer or episode can reach the next: each gets a container nobody has run anything in.

The configuration a container is made with (image, limits) is the `spec` of `take`; the pool
keeps containers of the latest spec only, so a caller whose limits change gets a cold container
once and then pooled ones of its new spec. The pool never shares a container with a forked
child (the child gets cold ones), and its containers carry the sandbox's labels, so the sweeps
that remove a dead owner's containers remove pooled ones too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from typing import Any


def remove(box: Any) -> None:
    try:
        box.remove(force=True, v=True)  # v: a session's tmpfs work-dir volume too
    except Exception:
        pass  # already gone; a leftover is swept by the next start (labels)


class ContainerPool:
    """Up to `size` ready containers of one spec, made and removed by `threads` background threads."""

    def __init__(self, size: int, threads: int = 2):
        if size < 0:
            raise ValueError(f"a container pool's size must be >= 0, got {size}")
        self.size = size
        self._threads_wanted = max(1, threads) if size else 0
        self._cond = threading.Condition()
        self._idle: list[Any] = []
        self._spec: Hashable | None = None
        self._make: Callable[[], Any] | None = None
        self._making = 0  # creations in flight in the background
        self._trash: list[Any] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._pid = os.getpid()

    # ---- the caller's side ------------------------------------------------------------
    def take(self, spec: Hashable, make: Callable[[], Any]) -> Any:
        """A started container of `spec` that nobody has used: a ready one, else one `make` makes now."""
        if not self.size or os.getpid() != self._pid:
            return make()  # no pool, or a forked child: never a container the parent may hand out too
        with self._cond:
            if self._closed:
                return make()
            if spec != self._spec:  # a new configuration: the ready ones of the old one go
                self._trash.extend(self._idle)
                self._idle.clear()
            self._spec, self._make = spec, make
            box = self._idle.pop(0) if self._idle else None
            self._start_threads()
            self._cond.notify_all()
        return box if box is not None else make()

    def discard(self, box: Any) -> None:
        """Remove a used container in the background (at once where there is no pool)."""
        if not self.size or os.getpid() != self._pid:
            remove(box)
            return
        with self._cond:
            if self._closed:
                closed = True
            else:
                closed = False
                self._trash.append(box)
                self._start_threads()
                self._cond.notify_all()
        if closed:
            remove(box)

    def ready(self) -> list[str]:
        """Ids of the containers ready to be handed out."""
        with self._cond:
            return [b.id for b in self._idle]

    def wait_ready(self, n: int = 1, timeout_s: float = 120.0) -> bool:
        """Block until `n` containers are ready (or the pool is full); for tests and warm-ups."""
        with self._cond:
            return self._cond.wait_for(
                lambda: len(self._idle) >= min(n, self.size) or self._closed, timeout=timeout_s
            )

    def close(self) -> None:
        """Stop making containers and remove the ready and discarded ones (waits for work in flight)."""
        with self._cond:
            self._closed = True
            boxes = self._idle + self._trash
            self._idle, self._trash = [], []
            threads = list(self._threads)
            self._cond.notify_all()
        for box in boxes:
            remove(box)
        if os.getpid() == self._pid:
            for t in threads:
                t.join(timeout=30)

    # ---- the background ---------------------------------------------------------------
    def _start_threads(self) -> None:
        while len(self._threads) < self._threads_wanted:
            t = threading.Thread(target=self._work, name="argym-container-pool", daemon=True)
            self._threads.append(t)
            t.start()

    def _wanted(self) -> bool:
        return self._make is not None and len(self._idle) + self._making < self.size

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._trash or self._wanted())
                if self._closed and not self._trash:
                    return
                if self._trash:  # removing first: it frees the engine's memory and pids
                    job, box = "remove", self._trash.pop()
                else:
                    job, box, spec, make = "make", None, self._spec, self._make
                    self._making += 1
            if job == "remove":
                remove(box)
                continue
            try:
                box = make()  # type: ignore[misc]
            except Exception:
                box = None  # the caller's own `make` will raise the clear error on the critical path
            with self._cond:
                self._making -= 1
                keep = box is not None and not self._closed and spec == self._spec
                if keep:
                    self._idle.append(box)
                self._cond.notify_all()
                if box is None and spec == self._spec:  # engine trouble: no retry loop; the next take re-arms
                    self._make = None
            if box is not None and not keep:
                remove(box)
