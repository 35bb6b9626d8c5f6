"""The learner in a Ray actor (`cluster.learner: true`): the updates run where Ray places them.

`LearnerWorker` holds the run's `Learner` (the policy with its optimizer, the KL reference
and VAPO's critic), built from copies of the trainer's models sent once through Ray's object
store, on the CPUs and GPUs the actor reserves (`cluster.cpus_per_learner`,
`cluster.gpus_per_learner`: a GPU node of its own while generation and envs run elsewhere).
`RayLearner` stands in for the `Learner` in the trainer's process: `update` sends the batch's
trajectories and brings back the metrics, the advantages and the trainable weights (all of
them under full fine-tuning, the adapters alone under LoRA), which it copies into the
trainer's policy, the copy that generates, evaluates and is checkpointed. So each step moves
one batch out and one set of weights back, and the optimizer's memory lives only in the actor.
Checkpoints take the learner's state from the actor (`checkpoint`), a resume puts it back.

Every call waits at most `cluster.update_timeout_s`; past it, or if the actor died, the run
stops with an `InfrastructureError` (the last checkpoint resumes it: an update cannot be
redone elsewhere without the optimizer state it lost).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from argym.errors import InfrastructureError


class LearnerWorker:
    """A Ray actor's body: a `Learner` over the models the driver sent."""

    def __init__(self, models: tuple[Any, Any, Any], config: Any, mixed_precision: str, threads: int):
        from argym.algorithms.host_memory import keep_freed_memory
        from argym.algorithms.learner import Learner
        from argym.algorithms.processes import make_accelerator
        from argym.algorithms.value import Critic

        torch.set_num_threads(max(threads, 1))
        model, ref_model, value_model = models
        accelerator = make_accelerator(mixed_precision)
        if accelerator.device.type == "cpu":
            keep_freed_memory()  # as the trainer's own CPU learner (algorithms/host_memory.py)
        model.to(accelerator.device)
        critic = Critic(value_model, config, accelerator) if value_model is not None else None
        self.learner = Learner(model, config, accelerator, ref_model=ref_model, critic=critic)
        self.model = accelerator.unwrap_model(self.learner.model)

    def pid(self) -> int:
        return os.getpid()

    def update(
        self, trajectories: list[Any], pad_id: int
    ) -> tuple[dict[str, float], list[Any], dict[str, Any]]:
        """One update; its metrics, each trajectory's advantage and the trainable weights after it."""
        metrics = self.learner.update(trajectories, pad_id)
        return metrics, self.learner.sample_advantages, self.weights()

    def weights(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().to("cpu") for n, p in self.model.named_parameters() if p.requires_grad}

    def fit_values(self, trajectories: list[Any], pad_id: int) -> dict[str, float]:
        return self.learner.fit_values(trajectories, pad_id)

    def keep_weights_on(self, dtype: torch.dtype) -> tuple[bool, dict[str, torch.Tensor]]:
        """`Learner.keep_weights_on`, and the (now rounded) trainable weights."""
        return self.learner.keep_weights_on(dtype), self.weights()

    def checkpoint(self) -> dict[str, Any]:
        return self.learner.checkpoint()

    def restore(self, state: dict[str, Any]) -> None:
        self.learner.restore(state)


class RayLearner:
    """A `LearnerWorker` actor behind the `Learner` interface the trainer uses (see the module docstring)."""

    fsdp = False  # one actor: its weights are whole

    def __init__(
        self,
        model: torch.nn.Module,
        config: Any,
        mixed_precision: str,
        ref_model: torch.nn.Module | None,
        value_model: torch.nn.Module | None,
        cpus: float,
        gpus: float,
        start_timeout_s: float,
        call_timeout_s: float,
    ):
        from argym.cluster.ray_runtime import check_fits, import_ray

        self._ray = ray = import_ray()
        check_fits(ray, "learner", cpus_per_learner=cpus, gpus_per_learner=gpus)
        self.model = model
        self.config = config
        self.sample_advantages: list[float | None] = []
        self.call_timeout_s = call_timeout_s
        actor = ray.remote(LearnerWorker).options(num_cpus=cpus, num_gpus=gpus, max_restarts=0)
        models = ray.put((model, ref_model, value_model))  # one object: a LoRA reference shares the policy
        self._worker = actor.remote(models, config, mixed_precision, max(int(cpus), 1))
        self._get(self._worker.pid.remote(), start_timeout_s, "start")

    def _get(self, ref: Any, timeout_s: float, what: str) -> Any:
        try:
            return self._ray.get(ref, timeout=timeout_s)
        except (self._ray.exceptions.GetTimeoutError, self._ray.exceptions.RayActorError) as e:
            raise InfrastructureError(
                f"the Ray learner failed to {what} within cluster.update_timeout_s / start_timeout_s "
                f"({type(e).__name__}: {str(e)[:300]}); the run resumes from its last checkpoint"
            ) from None

    def update(self, trajectories: list[Any], pad_id: int) -> dict[str, float]:
        """`Learner.update` in the actor; the trainer's policy then holds the updated weights."""
        metrics, self.sample_advantages, weights = self._get(
            self._worker.update.remote(trajectories, pad_id), self.call_timeout_s, "update"
        )
        self._load(weights)
        return dict(metrics)

    @torch.no_grad()
    def _load(self, weights: dict[str, torch.Tensor]) -> None:
        params = dict(self.model.named_parameters())
        missing = set(weights) - set(params)
        if missing:
            raise InfrastructureError(
                f"the Ray learner sent weights this policy lacks: {sorted(missing)[:5]}"
            )
        for name, tensor in weights.items():
            params[name].copy_(tensor)

    def keep_weights_on(self, dtype: torch.dtype) -> bool:
        """`Learner.keep_weights_on` in the actor (float32 masters there); this policy gets the rounded weights."""
        applies, weights = self._get(self._worker.keep_weights_on.remote(dtype), self.call_timeout_s, "round")
        self._load(weights)
        return bool(applies)

    def fit_values(self, trajectories: list[Any], pad_id: int) -> dict[str, float]:
        return dict(
            self._get(self._worker.fit_values.remote(trajectories, pad_id), self.call_timeout_s, "fit values")
        )

    def checkpoint(self) -> dict[str, Any]:
        return dict(self._get(self._worker.checkpoint.remote(), self.call_timeout_s, "checkpoint"))

    def restore(self, state: dict[str, Any]) -> None:
        self._get(self._worker.restore.remote(state), self.call_timeout_s, "restore")

    def close(self) -> None:
        self._ray.kill(self._worker)
