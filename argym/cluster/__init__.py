"""Running argym on a Ray cluster (``pip install 'argym[ray]'``, ``cluster.address=local|auto``).

`connect` joins or starts Ray for a run (`cluster.address`; None keeps everything in this
process, as before, and imports nothing); `RayEnvPool` hosts env instances in Ray actors that
the rollout engine drives through `RemoteEnv`, a stand-in with a deadline on every call.
docs/scaling.md says what runs where and why.
"""

from __future__ import annotations

from argym.cluster.connect import Cluster, connect
from argym.cluster.envs import EnvWorker, RayEnvPool, RemoteEnv
from argym.cluster.ray_runtime import import_ray

__all__ = ["Cluster", "EnvWorker", "RayEnvPool", "RemoteEnv", "connect", "import_ray"]
