"""Generation in Ray actors (`cluster.generators`): rollout workers that each hold a copy of the policy.

The rollout engine still drives every episode from the trainer's process; what moves out is
the one expensive call of a turn, `generate`. `RayGenerators` is a token policy whose
`generate` cuts the turn's prompts into chunks of `rollout.generate_batch` (each chunk seeded
``seed + start``, exactly as `HFPolicy.generate` seeds its own chunks in process) and spreads the
chunks over its `GeneratorWorker` actors, so a run samples the same tokens with any number of
generators. After each update the learner's weights go to every actor once through Ray's
object store (`load_weights`, the seam vLLM's engine uses in process).

A worker is started from the run's checkpoint (its files travel through the object store, so
no shared filesystem is needed); each call waits at most `cluster.generate_timeout_s`, past
which the step fails with an `InfrastructureError` that names the worker (a lost generator
loses the turn of every episode in flight, so there is nothing to go on with).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from argym.errors import ConfigError, InfrastructureError


class GeneratorWorker:
    """A Ray actor's body: an `HFPolicy` loaded from checkpoint files the driver sends."""

    def __init__(self, files: dict[str, bytes], dtype: str, compiled: bool, threads: int):
        import torch

        from argym.agents.hf import HFPolicy

        torch.set_num_threads(max(threads, 1))
        with tempfile.TemporaryDirectory(prefix="argym-generator-") as d:
            for name, data in files.items():
                Path(d, name).write_bytes(data)
            self.policy = HFPolicy.load(d, dtype=dtype)
        self.policy.compiled = compiled

    def pid(self) -> int:
        return os.getpid()

    def generate(self, prompts: list[list[int]], sampling: Any, seed: int | None) -> list[Any]:
        return self.policy.generate(prompts, sampling, seed=seed, batch_size=len(prompts))

    def load(self, state: dict[str, Any]) -> int:
        """The learner's weights (Hugging Face names); how many tensors were loaded."""
        missing, unexpected = self.policy.model.load_state_dict(state, strict=False)
        tied = set(getattr(self.policy.model, "_tied_weights_keys", None) or [])
        if unexpected or set(missing) - tied:
            raise ValueError(f"weights do not fit the generator: missing {missing}, unexpected {unexpected}")
        return len(state)


class RayGenerators:
    """`workers` GeneratorWorker actors behind one token policy (see the module docstring)."""

    def __init__(
        self,
        policy: Any,
        checkpoint: Path,
        workers: int,
        cpus_per_worker: float,
        start_timeout_s: float,
        call_timeout_s: float,
    ):
        from argym.cluster.connect import import_ray

        self._ray = ray = import_ray()
        cpus = ray.cluster_resources().get("CPU", 0)
        if cpus_per_worker > cpus:
            raise ConfigError(
                f"cluster.cpus_per_generator is {cpus_per_worker:g} but the Ray cluster has {cpus:g} CPUs in all: "
                f"no generator could ever start. Lower it, or add CPUs (cluster.num_cpus for a local Ray)."
            )
        self.tokenizer = policy.tokenizer
        self.renderer = policy.renderer
        self.pad_id = policy.pad_id
        self.stop_ids = policy.stop_ids
        self.batch_size = policy.batch_size
        self.name = f"ray:{workers}x:{policy.name}"
        self.call_timeout_s = call_timeout_s
        files = ray.put({p.name: p.read_bytes() for p in Path(checkpoint).iterdir() if p.is_file()})
        actor = ray.remote(GeneratorWorker).options(num_cpus=cpus_per_worker, max_restarts=0)
        dtype = str(next(policy.model.parameters()).dtype).removeprefix("torch.")
        threads = max(int(cpus_per_worker), 1)
        self._workers = [actor.remote(files, dtype, policy.compiled, threads) for _ in range(workers)]
        self._get([w.pid.remote() for w in self._workers], start_timeout_s, "start")
        self.load_weights(policy.model)

    def _get(self, refs: list[Any], timeout_s: float, what: str) -> list[Any]:
        try:
            return list(self._ray.get(refs, timeout=timeout_s))
        except (self._ray.exceptions.GetTimeoutError, self._ray.exceptions.RayActorError) as e:
            raise InfrastructureError(
                f"a Ray generator failed to {what} within cluster.generate_timeout_s / start_timeout_s "
                f"({type(e).__name__}: {str(e)[:300]})"
            ) from None

    def generate(
        self, prompts: list[list[int]], sampling: Any, seed: int | None = None, batch_size: int | None = None
    ) -> list[Any]:
        """One completion per prompt; chunk *i* (from prompt `start`) on worker *i* mod workers, seeded
        ``seed + start``."""
        size = batch_size or self.batch_size
        starts = range(0, len(prompts), size)
        refs = [
            self._workers[i % len(self._workers)].generate.remote(
                prompts[start : start + size], sampling, None if seed is None else seed + start
            )
            for i, start in enumerate(starts)
        ]
        return [c for chunk in self._get(refs, self.call_timeout_s, "generate") for c in chunk]

    def load_weights(self, model: Any) -> float:
        """`model`'s current weights into every worker (LoRA merged on the fly); returns the seconds it took."""
        from argym.agents.vllm import hf_state_dict

        t0 = time.perf_counter()
        state = {k: v.detach().to("cpu") for k, v in hf_state_dict(model).items()}
        ref = self._ray.put(state)
        counts = self._get([w.load.remote(ref) for w in self._workers], self.call_timeout_s, "load weights")
        if min(counts) != len(state):
            raise InfrastructureError(f"Ray generators loaded {counts} tensors, expected {len(state)}.")
        return time.perf_counter() - t0

    def close(self) -> None:
        for w in self._workers:
            self._ray.kill(w)
        self._workers = []
