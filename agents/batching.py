"""One request batcher: generate calls made one by one from many threads, grouped into few big ones.

A policy generates many prompts at once far faster than one by one, and is not thread-safe; yet two
parts of argym get their prompts one at a time, each from its own thread: the endpoint (an agent
program's HTTP request, agents/endpoint.py) and the streaming scheduler (an episode whose env step
has returned, agents/scheduler.py). Both hand them to a `RequestBatcher`. It owns the generator in
one thread: a caller `submit`s a prompt and gets a `Future`; the thread takes the requests waiting,
groups them by temperature and top-p (in arrival order), and makes one generate call per group, with
the largest `max_new_tokens` any of its requests asks for; each completion is then cut to its own
request's limit (`Completion.cut`), so a request near its token budget still shares the call. The
k-th call is seeded ``first_seed + k``.

How long the thread gathers: with `expected` (the endpoint: how many episodes are live) it waits
after the first request while more keep coming, each within `gap_s` of the last, until that many
are waiting or `max_wait_s` has passed (a program's next request follows the previous reply by the
time it takes to parse it and run its tools, so the requests of one turn do not arrive together;
BENCHMARKS.md, "An agent program through the endpoint"). Without it (the scheduler) it takes what
is waiting now: an episode never waits for another to come.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from argym.agents.policy import Completion, SamplingParams

GenerateFn = Callable[[list[list[int]], SamplingParams, int], tuple[list[Completion], int]]
"""``generate(prompts, sampling, seed) -> (completions, version)``: the policy, and the version of the
weights that sampled (`RolloutEngine.generate`)."""


@dataclass
class Request:
    """`n` completions of one prompt, wanted by one caller."""

    prompt: list[int]
    sampling: SamplingParams
    """Its own settings; `max_new_tokens` is this request's limit."""
    n: int = 1
    cancelled: Callable[[], BaseException | None] | None = None
    """Asked just before generating: an error to answer with instead (its caller no longer wants it)."""
    future: Future[tuple[list[Completion], int]] = field(default_factory=Future)
    """Its `n` completions and the version that sampled them."""


class RequestBatcher:
    """Generates the requests of many threads in one thread, batched (see the module docstring)."""

    def __init__(
        self,
        generate: GenerateFn,
        decode: Callable[[list[int]], str],
        first_seed: int = 0,
        expected: Callable[[], int] | None = None,
        gap_s: float = 0.0,
        max_wait_s: float = 0.0,
        name: str = "argym-generate",
    ):
        self._generate, self._decode = generate, decode
        self._seed = first_seed
        self._expected, self._gap_s, self._max_wait_s = expected, gap_s, max_wait_s
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._generating = threading.Lock()  # held while the generator runs
        self._lock = threading.Lock()  # a request is queued before `close`, or refused after it
        self._closed: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(
        self,
        prompt: list[int],
        sampling: SamplingParams,
        n: int = 1,
        cancelled: Callable[[], BaseException | None] | None = None,
    ) -> Future[tuple[list[Completion], int]]:
        """Queue a request; its future holds its `n` completions and their version, or the error that ended it."""
        request = Request(prompt, sampling, n, cancelled)
        with self._lock:
            if self._closed is None:
                self._queue.put(request)
                return request.future
        request.future.set_exception(self._closed)
        return request.future

    def quiesce(self) -> None:
        """Wait for a generation in progress to end (the learner must not update the weights under it)."""
        with self._generating:
            pass

    def close(self, error: BaseException) -> None:
        """Stop: requests still waiting, and any submitted later, end with `error`."""
        with self._lock:
            self._closed = error
            self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch = self._gather(first)
            with self._generating:
                groups: dict[tuple[float, float], list[Request]] = {}
                for r in batch:
                    groups.setdefault((r.sampling.temperature, r.sampling.top_p), []).append(r)
                for group in groups.values():
                    self._run(group)
            if self._closed is not None:
                break
        self._refuse_waiting()

    def _gather(self, first: Request) -> list[Request]:
        """`first` and the requests that join it (see the module docstring)."""
        batch, cap = [first], time.monotonic() + self._max_wait_s
        expected = self._expected
        while expected is None or len(batch) < max(expected(), 1):
            wait = 0.0 if expected is None else max(min(self._gap_s, cap - time.monotonic()), 0.0)
            try:
                request = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if request is None:
                self._queue.put(None)
                break
            batch.append(request)
        return batch

    def _run(self, requests: list[Request]) -> None:
        """One generate call for `requests` (one temperature and top-p); each gets its completions, cut to its limit."""
        live = []
        for r in requests:
            error = r.cancelled() if r.cancelled is not None else None
            if error is not None:
                r.future.set_exception(error)
            else:
                live.append(r)
        if not live:
            return
        params = replace(live[0].sampling, max_new_tokens=max(r.sampling.max_new_tokens for r in live))
        self._seed += 1
        try:
            completions, version = self._generate(
                [r.prompt for r in live for _ in range(r.n)], params, self._seed
            )
        except BaseException as e:  # every request of the call learns of it
            for r in live:
                r.future.set_exception(e)
            return
        at = 0
        for r in live:
            mine = [c.cut(r.sampling.max_new_tokens, self._decode) for c in completions[at : at + r.n]]
            at += r.n
            r.future.set_result((mine, version))

    def _refuse_waiting(self) -> None:
        """Closing: the requests still queued end with the closing error rather than waiting forever."""
        assert self._closed is not None
        while True:
            try:
                request = self._queue.get_nowait()
            except queue.Empty:
                return
            if request is not None:
                request.future.set_exception(self._closed)
