"""A CPU learner keeps the memory it frees: glibc's allocator told not to hand big blocks back to the kernel.

A training step on the CPU allocates and frees the same large tensors every
micro-batch (activations, the logits of a 49k-token vocabulary: hundreds of MB
each). glibc serves any block above its mmap threshold (at most 32 MB) with a
fresh `mmap` and returns it with `munmap` on free, so every step touches
gigabytes of new pages, each one a minor page fault the kernel zeroes.
SmolLM2's update (64 samples of ~60 tokens, full fine-tuning, a vLLM engine
holding memory beside it) took 5.4 million minor faults, 37 s of kernel time
and 90 s; told to keep freed memory, the same update took 0.25 million faults,
4.6 s of kernel time and 53 s (`benchmarks/cpu_update_memory.py`, BENCHMARKS.md,
"Where SmolLM2's update time went"). A caching allocator preloaded (jemalloc,
tcmalloc, as PyTorch's CPU performance tuning guide suggests) would do the same
from outside the process; this needs nothing installed.

`keep_freed_memory` sets, in this process, what the environment variables
``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=<huge> MALLOC_TOP_PAD_=1 GiB``
would set at its start: no block is mmapped (all come from the heap), the heap
is never trimmed, and it grows 1 GiB at a time. Freed memory is reused by the
next allocation instead of being faulted in again; the process's resident size
stays at its peak, which a training process reaches every step anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4
TOP_PAD = 1 << 30
# mallopt takes an int; glibc stores the trim threshold as a size_t, so -1 is its largest value
NEVER_TRIM = -1

_applied = False


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed blocks (see the module docstring). Returns whether it applies:
    not under another C library (musl, macOS), where `mallopt` does not exist. Safe to call again."""
    global _applied
    if _applied:
        return True
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):
        mallopt = None
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    settings = ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, NEVER_TRIM), (M_TOP_PAD, TOP_PAD))
    _applied = all(mallopt(param, value) == 1 for param, value in settings)
    if not _applied:
        log.warning("mallopt refused a setting: freed memory may go back to the kernel (slower CPU steps).")
    return _applied
