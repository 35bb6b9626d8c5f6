"""Joining or starting Ray for a run, as `cluster.address` says (Ray itself is imported lazily: `ray_runtime`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from argym.algorithms.cluster_config import CLUSTERS, ClusterConfig
from argym.cluster.ray_runtime import import_ray
from argym.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from argym.cluster.envs import RayEnvPool
    from argym.cluster.generators import RayGenerators
    from argym.cluster.learner import RayLearner


@CLUSTERS.register("ray")
class Cluster:
    """A run's Ray connection, its env workers, generators (`generators`) and learner (`learner`); `close` ends
    the env workers, and Ray if this run started it (the generators and the learner are the trainer's to close).

    ``local`` starts Ray in this process with `num_cpus`/`num_gpus`; any other address
    (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``) joins a running cluster (``ray start --head``).
    A Ray already initialised in this process (by a script or a test) is used as it is.
    """

    def __init__(self, config: ClusterConfig):
        from argym.cluster.envs import RayEnvPool

        ray = import_ray()
        self.started = not ray.is_initialized()
        if self.started and config.address == "local":
            ray.init(num_cpus=config.num_cpus, num_gpus=config.num_gpus, include_dashboard=False)
        elif self.started:
            try:
                ray.init(address=config.address)
            except ConnectionError as e:
                raise ConfigError(
                    f"cluster.address is {config.address!r} but no Ray cluster answers there ({e}). Start one "
                    f"(`ray start --head` on the head node), or set cluster.address=local to start Ray here."
                ) from None
        self._ray = ray
        self.config = config
        self.envs: RayEnvPool = RayEnvPool(
            config.env_workers, config.cpus_per_worker, config.env_timeout_s, config.start_timeout_s
        )

    def generators(
        self, policy: Any, checkpoint: Path, vllm: Any = None, lora_rank: int = 0
    ) -> RayGenerators:
        """`cluster.generators` Ray actors generating for `policy` (in vLLM engines with `vllm`, a `VLLMConfig`),
        started from its `checkpoint` and synced (`lora_rank` > 0: a LoRA policy's adapter alone, vLLM only)."""
        from argym.cluster.generators import RayGenerators

        c = self.config
        return RayGenerators(
            policy,
            checkpoint,
            c.generators,
            c.cpus_per_generator,
            c.start_timeout_s,
            c.generate_timeout_s,
            gpus_per_worker=c.gpus_per_generator,
            vllm=vllm,
            lora_rank=lora_rank,
        )

    def learner(
        self, model: Any, config: Any, mixed_precision: str, ref_model: Any, value_model: Any
    ) -> RayLearner:
        """The run's learner in a Ray actor (`cluster.learner`), over copies of these models."""
        from argym.cluster.learner import RayLearner

        c = self.config
        return RayLearner(
            model,
            config,
            mixed_precision,
            ref_model,
            value_model,
            c.cpus_per_learner,
            c.gpus_per_learner,
            c.start_timeout_s,
            c.update_timeout_s,
        )

    def metrics(self) -> dict[str, float]:
        return self.envs.metrics()

    def close(self) -> None:
        self.envs.close()
        if self.started:
            self._ray.shutdown()


def connect(config: ClusterConfig) -> Cluster | None:
    """The run's `Cluster`, or None for ``cluster.address: null`` (everything in this process, no Ray)."""
    return None if config.address is None else Cluster(config)
