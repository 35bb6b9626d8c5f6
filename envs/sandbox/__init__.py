"""Sandboxes for untrusted code: one `Sandbox` interface, `process` and `docker` backends.

Shared by every env that runs model-written code (Code today; SWE and tools next).
See `argym.envs.sandbox.base` for the interface and docs/design.md, "Sandboxes".
"""

from argym.envs.sandbox.base import (
    ExecResult,
    Limits,
    Program,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
    clean_output,
    make_sandbox,
)

__all__ = [
    "ExecResult",
    "Limits",
    "Program",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "clean_output",
    "make_sandbox",
]
