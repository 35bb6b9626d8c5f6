"""Warm slots of `ProcessSandbox` (docs/sandboxes.md, "Warm slots"): after a single-use run of a program that
reads all of its input from stdin, the slot's next run of that program is started in the background, so the
next caller only hands it its stdin."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from argym.envs.sandbox.base import Limits
from argym.envs.sandbox.pump import Started, kill_tree, release

log = logging.getLogger("argym.envs.sandbox.process")  # logged under the sandbox's name


class WarmSlots:
    """The slot pool with its warm runs; `ProcessSandbox` sets these fields and provides `_start`."""

    slots: int
    _slots: queue.Queue[int]
    _warm: dict[int, tuple[Any, Started]]
    _warm_lock: threading.Lock
    _warm_queue: queue.SimpleQueue[Any] | None
    _cooled: bool
    _closed: bool

    _start: Callable[[int, list[str], dict[str, bytes | str] | None, Limits, bool], Started]

    def _take_slot(self, key: Any) -> tuple[int, Started | None]:
        """A free slot, and its warm run if it was started for `key` and is still waiting.

        A warm run started for another program, or one that died while it waited, is killed
        first (as the end of a run is), so the slot's uid and cgroup are free for this run."""
        slot = self._slots.get()
        with self._warm_lock:
            held = self._warm.pop(slot, None)
        if held is not None:
            if held[0] == key and held[1].proc.poll() is None:
                return slot, held[1]
            try:
                self._discard(held[1])
            except BaseException:
                self._slots.put(slot)
                raise
        return slot, None

    def _give_back(self, slot: int, key: Any) -> None:
        """Return `slot` to the pool; after a warm program, once the warmer has started its next run."""
        if key is None or self._closed:
            self._slots.put(slot)
            return
        with self._warm_lock:
            if self._warm_queue is None:
                self._warm_queue = queue.SimpleQueue()
                # one long-lived thread starts every warm run: bwrap's --die-with-parent follows the
                # thread that forked it (PR_SET_PDEATHSIG), so a caller's short-lived thread must not
                threading.Thread(target=self._warmer, args=(self._warm_queue,), daemon=True).start()
            self._warm_queue.put((slot, key))

    def _warmer(self, jobs: queue.SimpleQueue[Any]) -> None:
        """Start the next run of each slot queued here, then return the slot to the pool."""
        while (job := jobs.get()) is not None:
            slot, (argv, limits, result_channel) = job
            try:
                with self._warm_lock:
                    if not (self._closed or self._cooled):
                        started = self._start(slot, list(argv), None, limits, result_channel)
                        self._warm[slot] = (job[1], started)
            except Exception as e:  # the slot's next run starts cold and reports what fails
                log.debug("warm start on slot %d failed: %s", slot, e)
            finally:
                self._slots.put(slot)

    def _discard(self, started: Started) -> None:
        """Kill a warm run that will not be used, and release what it holds."""
        kill_tree(started.proc, started.uid, started.group)
        release(started)

    def settle(self) -> None:
        """Wait until every slot is free: no run and no warm start in progress (tests, benchmarks)."""
        held = [self._slots.get() for _ in range(self.slots)]
        for slot in held:
            self._slots.put(slot)

    def warm_pids(self, slot: int) -> set[int]:
        """The processes of `slot`'s waiting warm run (bubblewrap and all below it); empty if it has none."""
        with self._warm_lock:
            held = self._warm.get(slot)
        if held is None:
            return set()
        children: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    children.setdefault(int(f.read().rsplit(b")", 1)[1].split()[1]), []).append(int(name))
            except (OSError, ValueError, IndexError):
                pass
        tree, todo = set(), [held[1].proc.pid]
        while todo:
            pid = todo.pop()
            tree.add(pid)
            todo += children.get(pid, [])
        return tree

    def cool(self) -> None:
        # under the lock: a run that takes one of these slots meanwhile waits in `_take_slot` until the
        # slot's warm run (and every process of its uid) is gone, so the kill cannot reach that run
        with self._warm_lock:
            self._cooled = True
            for _, started in self._warm.values():
                self._discard(started)
            self._warm.clear()
