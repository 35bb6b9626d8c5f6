"""The harness's pipe protocol (part of the harness script: stdlib only, see `argym.envs.sandbox.pyharness`).

Harness and candidate talk over two pipes in length-prefixed `marshal` frames: marshal carries exact builtin
data only, and `_plain` refuses what marshal would also take (code objects), so a reply can hold no object
of the candidate's own class. Also the bounded texts either side sends (`_short`, `_tb`: a traceback without
the harness's frames). `harness_source` sends this file ahead of the harness's own text.
"""

import marshal
import os
import select
import struct
import sys
import time
import traceback

MAX_MSG = 16 << 20
MAX_TEXT = 2000


def _send(fd, obj):
    data = marshal.dumps(obj)
    data = struct.pack("<Q", len(data)) + data
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _recv_exact(fd, n, deadline):
    buf = b""
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _recv(fd, deadline=None):
    (n,) = struct.unpack("<Q", _recv_exact(fd, 8, deadline))
    if n > MAX_MSG:
        raise ValueError("message too large")
    return marshal.loads(_recv_exact(fd, n, deadline))


def _plain(x, depth=0):
    """True if `x` holds only exact builtin data types (marshal also accepts code objects)."""
    if depth > 100:
        return False
    t = type(x)
    if t in (int, float, complex, str, bytes, bool, type(None)):
        return True
    if t in (list, tuple, set, frozenset):
        return all(_plain(v, depth + 1) for v in x)
    if t is dict:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in x.items())
    return False


def _short(text):
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT // 2] + "\n...\n" + text[-MAX_TEXT // 2 :]


def _tb():
    """The current exception's traceback, without the harness's own frames (bounded)."""
    te = traceback.TracebackException(*sys.exc_info())
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != "<string>"][-3:])
    return _short("".join(te.format()))
