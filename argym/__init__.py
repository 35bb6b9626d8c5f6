"""argym: a gym for training LLM agents with reinforcement learning.

`import argym` registers the envs (``argym/Math-v0``, ...) with gymnasium and
stays light: no torch, no transformers, until an env or policy is built.
"""

from argym.errors import (
    ArgymError,
    ConfigError,
    EnvStateError,
    InfrastructureError,
    MissingDependencyError,
    TaskNotFoundError,
    UnknownEnvError,
)
from argym.registration import make, register_envs, registered_ids
from argym.types import Message, Task, Trajectory

__version__ = "0.1.0"

register_envs()

__all__ = [
    "ArgymError",
    "ConfigError",
    "EnvStateError",
    "InfrastructureError",
    "Message",
    "MissingDependencyError",
    "Task",
    "TaskNotFoundError",
    "Trajectory",
    "UnknownEnvError",
    "__version__",
    "make",
    "register_envs",
    "registered_ids",
]
