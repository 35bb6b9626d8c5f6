"""The learner's registries use argym's one plug-in mechanism, `argym.registry.Registry` (re-exported here)."""

from argym.registry import Registry

__all__ = ["Registry"]
