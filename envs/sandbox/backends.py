"""argym's own sandbox backends, registered under their names (`SANDBOX_BACKENDS` lists them before this
module is imported, and imports it on first use): ``process``, ``process-weak`` and ``docker``."""

from __future__ import annotations

from typing import Any

from argym.envs.sandbox.base import Sandbox, register_sandbox_backend


@register_sandbox_backend("process")
def _process(**kwargs: Any) -> Sandbox:
    from argym.envs.sandbox.process import ProcessSandbox

    return ProcessSandbox(**kwargs)


@register_sandbox_backend("process-weak")
def _process_weak(**kwargs: Any) -> Sandbox:
    from argym.envs.sandbox.process import ProcessSandbox

    return ProcessSandbox(allow_weak=True, **kwargs)


@register_sandbox_backend("docker")
def _docker(**kwargs: Any) -> Sandbox:
    from argym.envs.sandbox.docker import DockerSandbox

    return DockerSandbox(**kwargs)
