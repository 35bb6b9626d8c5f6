"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes | Callable[[Path], None]) -> Path:
    """Write `data` (text, bytes, or a function that writes a given path) to `path` via a rename.

    The temporary file sits beside `path` (same filesystem, so the rename is atomic) and carries the
    writer's pid, so two processes writing the same file never share one; its suffix is kept so a writer
    that picks the format from the name (matplotlib's savefig) still sees it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        elif isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            data(tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
