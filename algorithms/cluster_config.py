"""The `cluster` section of a recipe: where the training envs, generators and learner run (docs/scaling.md),
and what the trainer asks of a cluster (`Cluster`). The Ray cluster itself is argym/cluster/, above the
learners: it registers in `CLUSTERS`, and `connect` reaches it there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from argym.errors import ConfigError
from argym.registry import Registry

if TYPE_CHECKING:
    import torch

    from argym.agents.policy import Generator


@dataclass
class ClusterConfig:
    """Where the envs run (docs/scaling.md): in this process, or in Ray actors (``pip install 'argym[ray]'``)."""

    address: str | None = None
    """null: everything in this process (no Ray); local: start Ray here (`num_cpus`, `num_gpus`);
    auto, HOST:PORT or ray://HOST:PORT: join a running cluster (`ray start --head` on its head node)."""
    num_cpus: int | None = None
    """CPUs a `local` Ray may use (None: all of this machine's)."""
    num_gpus: int | None = None
    """GPUs a `local` Ray may use (None: all of this machine's)."""
    env_workers: int = 2
    """Ray actors hosting the training envs; the envs are spread over them round-robin."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each env worker (fractions share a CPU)."""
    env_timeout_s: float = 600.0
    """Deadline of each env reset and step: a worker that misses it is killed and replaced, and its
    episodes become infrastructure failures (kept out of the advantages, counted in `cluster/*`)."""
    start_timeout_s: float = 300.0
    """Deadline of building one env in a worker, a fresh worker's start included (and of a generator's start)."""
    generators: int = 0
    """Ray actors that generate (rollout workers, each a copy of the policy in transformers or, with
    `rollout.backend: vllm`, a vLLM engine; a turn's prompts spread over them, the learner's weights sent to
    each after every update); 0: the trainer generates."""
    cpus_per_generator: float = 1.0
    """CPUs Ray reserves for each generator (its torch threads)."""
    gpus_per_generator: float = 0.0
    """GPUs Ray reserves for each generator (1: a vLLM engine or transformers copy on a GPU of its own)."""
    generate_timeout_s: float = 600.0
    """Deadline of each generate call and weight load on the generators; past it the step fails."""
    learner: bool = False
    """true: the learner (policy, optimizer, KL reference, critic) runs in a Ray actor, and the trainer's copy of
    the policy receives its trainable weights after each update (docs/scaling.md)."""
    cpus_per_learner: float = 1.0
    """CPUs Ray reserves for the learner (its torch threads)."""
    gpus_per_learner: float = 0.0
    """GPUs Ray reserves for the learner (1: a GPU of its own, while generation and envs run elsewhere)."""
    update_timeout_s: float = 3600.0
    """Deadline of each call to the learner (an update, a checkpoint); past it the run stops (resume it)."""

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise ConfigError(
                f"cluster.address must be null, local, auto, HOST:PORT or ray://HOST:PORT, got {self.address!r}."
            )
        if self.env_workers < 1:
            raise ConfigError(f"cluster.env_workers must be >= 1, got {self.env_workers}.")
        if (
            min(self.generators, self.cpus_per_generator, self.gpus_per_generator) < 0
            or self.generate_timeout_s <= 0
        ):
            raise ConfigError(
                f"cluster.generators, cluster.cpus_per_generator and cluster.gpus_per_generator must be >= 0 and "
                f"cluster.generate_timeout_s > 0, got {self.generators}, {self.cpus_per_generator}, "
                f"{self.gpus_per_generator} and {self.generate_timeout_s}."
            )
        if self.generators and self.address is None:
            raise ConfigError(
                f"cluster.generators={self.generators} runs generation in Ray actors and needs a cluster: set "
                f"cluster.address (local starts Ray here), or cluster.generators=0."
            )
        if self.learner and self.address is None:
            raise ConfigError(
                "cluster.learner=true runs the learner in a Ray actor and needs a cluster: set cluster.address "
                "(local starts Ray here), or cluster.learner=false."
            )
        if min(self.cpus_per_learner, self.gpus_per_learner) < 0 or self.update_timeout_s <= 0:
            raise ConfigError(
                f"cluster.cpus_per_learner and cluster.gpus_per_learner must be >= 0 and cluster.update_timeout_s "
                f"> 0, got {self.cpus_per_learner}, {self.gpus_per_learner} and {self.update_timeout_s}."
            )
        if self.cpus_per_worker < 0:
            raise ConfigError(f"cluster.cpus_per_worker must be >= 0, got {self.cpus_per_worker}.")
        if min(self.env_timeout_s, self.start_timeout_s) <= 0:
            raise ConfigError(
                f"cluster.env_timeout_s and cluster.start_timeout_s must be > 0, got "
                f"{self.env_timeout_s} and {self.start_timeout_s}."
            )


class RemoteLearner(Protocol):
    """A learner in a Ray actor (`argym.cluster.learner.RayLearner`), as the trainer drives it."""

    model: Any
    """The trainer's copy of the policy, which the actor's updates are sent to."""
    fsdp: bool
    sample_advantages: list[float | None]

    def update(self, trajectories: list[Any], pad_id: int) -> dict[str, float]: ...

    def keep_weights_on(self, dtype: torch.dtype) -> bool: ...

    def fit_values(self, trajectories: list[Any], pad_id: int) -> dict[str, float]: ...

    def checkpoint(self) -> dict[str, Any]: ...

    def restore(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class Cluster(Protocol):
    """A run's cluster (`argym.cluster.connect.Cluster`): its env workers (`envs.make` builds a training env
    there), `generators` and `learner` in actors, their `metrics`; `close` ends the env workers."""

    envs: Any

    def generators(
        self, policy: Any, checkpoint: Path, vllm: Any = None, lora_rank: int = 0
    ) -> Generator: ...

    def learner(
        self, model: Any, config: Any, mixed_precision: str, ref_model: Any, value_model: Any
    ) -> RemoteLearner: ...

    def metrics(self) -> dict[str, float]: ...

    def close(self) -> None: ...


CLUSTERS: Registry[Callable[[ClusterConfig], Cluster]] = Registry("cluster", {"ray": "argym.cluster.connect"})
"""``ray``: Ray's cluster (argym/cluster/connect.py registers it; imported on first use)."""


def connect(config: ClusterConfig) -> Cluster | None:
    """The run's cluster, or None for ``cluster.address: null`` (everything in this process, nothing of Ray imported)."""
    return None if config.address is None else CLUSTERS.get("ray")(config)
