"""Ctrl-C and SIGTERM deferred to the end of a step, so a stopped loop checkpoints a whole step.

A signal that lands inside an optimizer step could leave half the parameters updated; a checkpoint
written then would resume from weights no run ever had. Inside `deferred_stop()` the first SIGINT or
SIGTERM only sets a flag; the loop finishes its step, checkpoints and calls `raise_stop()`, which
raises what the signal would have (KeyboardInterrupt, or SystemExit with 128 + 15 for SIGTERM). A second
signal raises at once, for a user who will not wait for the step.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class StopRequest:
    """The signal received inside `deferred_stop()`, if any."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def raise_stop(self) -> None:
        """Raise what the received signal would have raised had it not been deferred."""
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            sys.exit(128 + self.signum)


@contextlib.contextmanager
def deferred_stop() -> Iterator[StopRequest]:
    """Defer SIGINT and SIGTERM to the caller's next `raise_stop()` (main thread only; elsewhere a no-op)."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous: dict[signal.Signals, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.requested:  # the second one: stop now
            stop.raise_stop()
        stop.signum = signum

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.getsignal(sig)
        signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
