"""Forking slots of `ProcessSandbox` (docs/sandboxes.md, "Forking slots"): which slot's zygote forks a run,
starting it when needed, and stopping the zygotes (`cool`, a cold run on the slot, `close`)."""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable

from argym.envs.sandbox import cgroup
from argym.envs.sandbox.base import Limits, SandboxError, program_env
from argym.envs.sandbox.confine import bwrap_argv
from argym.envs.sandbox.pump import Started
from argym.envs.sandbox.zygote import OUTSIDE_THE_RUN, Zygote

log = logging.getLogger("argym.envs.sandbox.process")  # logged under the sandbox's name


class ForkingSlots:
    """The zygote of each slot; `ProcessSandbox` sets these fields and provides `uid` and `_run_group`."""

    bwrap: str | None
    python: str
    limits: Limits
    warm: bool
    _prefix: str
    _site: list[str]
    _slots: queue.Queue[int]
    _zygotes: dict[int, Zygote]
    _forks_ok: bool
    uid: Callable[[int], int | None]
    _run_group: Callable[..., cgroup.TreeGroup | None]

    def _fork(self, slot: int, argv: list[str], limits: Limits, result_channel: bool) -> Started | None:
        """`argv` (``python -c SOURCE ...``) forked from the slot's zygote, started first if need be; None where
        no zygote can run here (then the run starts cold, and a one-time warning says why)."""
        zygote = self._zygotes.get(slot)
        if zygote is None or not zygote.alive():
            self._stop_zygote(slot)
            assert self.bwrap is not None  # a run forks only under bubblewrap (`ProcessSandbox.run`)
            argv_ = bwrap_argv(
                self.bwrap,
                self._prefix,
                self._site,
                None,
                [],
                self.limits,
                die_with_parent=False,
                as_pid_1=True,
            )
            zygote = self._zygotes[slot] = Zygote(argv_, self.python, self.uid(slot), program_env(None))
        env = program_env(None)
        if result_channel:
            env.update(ARGYM_RESULT_FD="3", ARGYM_OUTPUT_CAP=str(limits.output_bytes // 2))
        uid = self.uid(slot)
        group = self._run_group(slot, limits, middle=1)
        try:
            proc, result_r = zygote.fork(
                argv[2],
                argv[3:],
                env,
                limits,
                limits.processes + OUTSIDE_THE_RUN if uid is not None else None,
                group,
                result_channel,
            )
        except SandboxError as e:
            if group is not None:
                group.remove()
            self._stop_zygote(slot)
            if not self._forks_ok:
                self.warm = False
                log.warning("Forking slots do not work here (%s); programs start cold.", e)
                return None
            raise
        self._forks_ok = True
        return Started(proc, uid, group, None, result_r, None, limits)  # type: ignore[arg-type]

    def cool(self) -> None:
        """Stop the slots' zygotes (the next forked program starts its slot's again): an idle owner keeps no
        process. A slot running a program keeps its zygote until a later `cool` or `close`."""
        held = []
        while True:
            try:
                held.append(self._slots.get_nowait())
            except queue.Empty:
                break
        try:
            for slot in held:
                self._stop_zygote(slot)
        finally:
            for slot in held:
                self._slots.put(slot)

    def _stop_zygote(self, slot: int) -> None:
        zygote = self._zygotes.pop(slot, None)
        if zygote is not None:
            zygote.stop()

    def zygote_pids(self, slot: int) -> set[int]:
        """The processes of `slot`'s zygote (bubblewrap and all below it); empty if it has none."""
        zygote = self._zygotes.get(slot)
        return zygote.pids() if zygote is not None and zygote.alive() else set()
