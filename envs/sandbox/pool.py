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
    """Up to `size` ready containers of one spec, made and removed by `threads` background threads.

    With `bound`, at most that many containers of the pool are alive at once, counting the ready
    ones, those handed out and those not yet removed; a `take` past it waits for a removal.
    """

    def __init__(self, size: int, threads: int = 2, bound: int | None = None):
        if size < 0:
            raise ValueError(f"a container pool's size must be >= 0, got {size}")
        if bound is not None and bound <= size:
            raise ValueError(f"a container pool's bound ({bound}) must exceed its size ({size})")
        self.size = size
        self.bound = bound
        self._alive = 0  # ready + handed out + being made + waiting for or in removal
        self._threads_wanted = max(1, threads) if size else 0
        self._cond = threading.Condition()
        self._idle: list[Any] = []
        self._spec: Hashable | None = None
        self._make: Callable[[], Any] | None = None
        self._making = 0  # creations in flight in the background
        self._removing = 0  # removals in flight in the background
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
            self._start_threads()
            self._cond.notify_all()
            if self.bound is not None:  # room for one more, or a ready one
                self._cond.wait_for(lambda: self._idle or self._alive < self.bound or self._closed)  # type: ignore[operator]
            if self._idle:
                return self._idle.pop(0)
            self._alive += 1
        try:
            return make()
        except BaseException:
            with self._cond:
                self._alive -= 1
                self._cond.notify_all()
            raise

    def discard(self, box: Any) -> None:
        """Remove a used container in the background (at once where there is no pool)."""
        if not self.size or os.getpid() != self._pid:
            remove(box)
            return
        with self._cond:
            closed = self._closed
            if not closed:
                self._trash.append(box)
                self._start_threads()
                self._cond.notify_all()
        if closed:
            remove(box)
            with self._cond:
                self._alive -= 1

    def ready(self) -> list[str]:
        """Ids of the containers ready to be handed out."""
        with self._cond:
            return [b.id for b in self._idle]

    def alive(self) -> int:
        """Containers of the pool alive now: ready, handed out, being made or not yet removed."""
        with self._cond:
            return self._alive

    def wait_settled(self, timeout_s: float = 120.0) -> bool:
        """Block until every discarded container is removed and the pool is full (or at its bound); for
        tests and warm-ups."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._closed or not (self._trash or self._removing or self._making or self._wanted()),
                timeout=timeout_s,
            )

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
        with self._cond:
            self._alive -= len(boxes)
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
        room = self.bound is None or self._alive < self.bound
        return room and self._make is not None and len(self._idle) + self._making < self.size

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._trash or self._wanted())
                if self._closed and not self._trash:
                    return
                if self._trash:  # removing first: it frees the engine's memory and pids
                    job, box = "remove", self._trash.pop()
                    self._removing += 1
                else:
                    job, box, spec, make = "make", None, self._spec, self._make
                    self._making += 1
                    self._alive += 1
            if job == "remove":
                remove(box)
                with self._cond:
                    self._alive -= 1
                    self._removing -= 1
                    self._cond.notify_all()
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
                elif box is None:
                    self._alive -= 1
                    if spec == self._spec:  # engine trouble: no retry loop; the next take re-arms
                        self._make = None
                self._cond.notify_all()
            if box is not None and not keep:
                remove(box)
                with self._cond:
                    self._alive -= 1
                    self._cond.notify_all()
