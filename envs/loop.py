"""`LoopThread`: an asyncio event loop on a thread an env owns.

Envs are synchronous (`step` returns a value), but some libraries they drive
are async (the MCP SDK's clients, verifiers' scoring). `asyncio.run` would fail
when the caller already runs a loop (an async agent, a notebook), and a client
session must live on one loop for its whole life. So such an env owns one
`LoopThread`: coroutines run on it with a deadline, and `close()` stops it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from argym.errors import ArgymError

T = TypeVar("T")


class LoopTimeout(ArgymError, TimeoutError):
    """A coroutine run on a `LoopThread` did not finish within its deadline; it was cancelled."""


class LoopThread:
    """A daemon thread running one event loop; `run(coro, timeout_s)` is thread-safe."""

    def __init__(self, name: str = "argym-loop"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run `coro` on the loop and return its result; `LoopTimeout` (after cancelling it) past `timeout_s`."""
        if not self.alive:
            coro.close()
            raise RuntimeError("The env's event loop is closed: the env was closed.")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise LoopTimeout(f"did not finish within {timeout_s:g} s") from None

    def close(self, timeout_s: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and join the thread; safe to call twice."""
        if self.loop.is_closed():
            return
        if self._thread.is_alive():

            async def _cancel_all() -> None:
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            try:
                asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(timeout_s)
            except (concurrent.futures.TimeoutError, RuntimeError):
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self.loop.close()
