"""Generation in Ray actors (`cluster.generators`): rollout workers that each hold a copy of the policy,
in transformers or in a vLLM engine (`rollout.backend: vllm`), on the CPUs and GPUs each reserves.

The rollout engine still drives every episode from the trainer's process; what moves out is
the one expensive call of a turn, `generate`. `RayGenerators` is a run's `Generator` (agents/policy.py)
whose `generate` cuts the turn's prompts into chunks of `rollout.generate_batch` (each chunk seeded
``seed + start``, exactly as `HFPolicy.generate` seeds its own chunks in process) and spreads the
chunks over its `GeneratorWorker` actors, so a run samples the same tokens with any number of
generators. vLLM engines take one equal share of a turn each (an engine batches continuously);
each request is still seeded by its place in the turn. After each update the learner's weights go to every actor once through Ray's
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

from argym.errors import InfrastructureError


class GeneratorWorker:
    """A Ray actor's body: an `HFPolicy`, or a vLLM engine (`vllm` given), loaded from checkpoint files the
    driver sends."""

    def __init__(
        self,
        files: dict[str, bytes],
        dtype: str,
        compiled: bool,
        threads: int,
        vllm: Any = None,
        lora_rank: int = 0,
    ):
        import torch

        from argym.agents.hf import HFPolicy

        torch.set_num_threads(max(threads, 1))
        self.policy: Any
        with tempfile.TemporaryDirectory(prefix="argym-generator-") as d:
            for name, data in files.items():
                Path(d, name).write_bytes(data)
            if vllm is None:
                self.policy = HFPolicy.load(d, dtype=dtype)
                self.policy.compiled = compiled
            else:  # the engine reads the files while it starts, not after
                from argym.agents.vllm import VLLMPolicy

                self.policy = VLLMPolicy(d, vllm, name=f"vllm-actor:{os.getpid()}", lora_rank=lora_rank)
        self.vllm = vllm is not None

    def pid(self) -> int:
        return os.getpid()

    def engine_pids(self) -> list[int]:
        """The vLLM engine's own processes (its core and workers), found under this actor when it started;
        empty for transformers or an engine in process."""
        return sorted(self.policy.engine_pids) if self.vllm else []

    def weights_dtype(self) -> Any:
        """A vLLM engine's weight dtype (the learner may train on it: algorithms/weight_grid.py); None for transformers."""
        return self.policy.weights_dtype if self.vllm else None

    def generate(self, prompts: list[list[int]], sampling: Any, seed: int | None) -> list[Any]:
        if self.vllm:  # request i is seeded seed + i, as in process
            return list(self.policy.generate(prompts, sampling, seed=seed))
        return list(self.policy.generate(prompts, sampling, seed=seed, batch_size=len(prompts)))

    def load(self, state: dict[str, Any]) -> int:
        """The learner's weights (Hugging Face names); how many tensors were loaded."""
        if self.vllm:
            return int(self.policy.load_state_dict(state))
        missing, unexpected = self.policy.model.load_state_dict(state, strict=False)
        tied = set(getattr(self.policy.model, "_tied_weights_keys", None) or [])
        if unexpected or set(missing) - tied:
            raise ValueError(f"weights do not fit the generator: missing {missing}, unexpected {unexpected}")
        return len(state)

    def load_adapter(self, files: dict[str, bytes], base: dict[str, Any] | None) -> int:
        """A LoRA adapter's files (peft's) as the vLLM engine's adapter, over `base` weights (Hugging Face names)
        loaded first where given; how many files."""
        from argym.agents.vllm import adapter_dir

        extra = 0
        if base is not None:
            self.policy.load_state_dict(base)
            extra = self.policy.sync_bytes
        path = adapter_dir()
        for name, data in files.items():
            Path(path, name).write_bytes(data)
        self.policy.use_adapter(path, extra)
        return len(files)

    def close(self) -> None:
        """Stop a vLLM engine's processes (a kill of the actor alone would leave them to notice)."""
        if self.vllm:
            self.policy.close()


class RayGenerators:
    """`workers` GeneratorWorker actors behind one `Generator` (see the module docstring)."""

    def __init__(
        self,
        policy: Any,
        checkpoint: Path,
        workers: int,
        cpus_per_worker: float,
        start_timeout_s: float,
        call_timeout_s: float,
        gpus_per_worker: float = 0.0,
        vllm: Any = None,
        lora_rank: int = 0,
    ):
        """`lora_rank` > 0 (vLLM engines): a peft model's syncs send its adapter alone (the base weights once)."""
        from argym.cluster.ray_runtime import check_fits, import_ray

        self._ray = ray = import_ray()
        check_fits(ray, "generator", cpus_per_generator=cpus_per_worker, gpus_per_generator=gpus_per_worker)
        self.tokenizer = policy.tokenizer
        self.renderer = policy.renderer
        self.pad_id = policy.pad_id
        self.stop_ids = policy.stop_ids
        self.batch_size = policy.batch_size
        self.name = f"ray:{workers}x{':vllm' if vllm is not None else ''}:{policy.name}"
        self.call_timeout_s = call_timeout_s
        self.even = vllm is not None  # an engine batches continuously: each takes an equal share of a turn
        files = ray.put({p.name: p.read_bytes() for p in Path(checkpoint).iterdir() if p.is_file()})
        actor = ray.remote(GeneratorWorker).options(
            num_cpus=cpus_per_worker, num_gpus=gpus_per_worker, max_restarts=0
        )
        dtype = str(next(policy.model.parameters()).dtype).removeprefix("torch.")
        threads = max(int(cpus_per_worker), 1)
        self._workers = [
            actor.remote(files, dtype, policy.compiled, threads, vllm, lora_rank) for _ in range(workers)
        ]
        self.adapter_sync = lora_rank > 0 and vllm is not None
        self.sync_bytes = 0
        """The bytes the latest `load_weights` put in the object store (the weights, or the adapter's files)."""
        self._base_sent = False
        self._get([w.pid.remote() for w in self._workers], start_timeout_s, "start")
        self.weights_dtype = self._get([self._workers[0].weights_dtype.remote()], call_timeout_s, "start")[0]
        """The engines' weight dtype (vLLM), as `VLLMPolicy.weights_dtype`; None: the policy's own."""
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
        ``seed + start``. Chunks of `rollout.generate_batch` prompts (transformers), or one equal share
        per worker (vLLM engines, whose request i is seeded seed + i: the same seeds either way)."""
        size = -(-len(prompts) // len(self._workers)) if self.even else batch_size or self.batch_size
        starts = range(0, len(prompts), size)
        refs = [
            self._workers[i % len(self._workers)].generate.remote(
                prompts[start : start + size], sampling, None if seed is None else seed + start
            )
            for i, start in enumerate(starts)
        ]
        return [c for chunk in self._get(refs, self.call_timeout_s, "generate") for c in chunk]

    def load_weights(self, model: Any) -> float:
        """`model`'s current weights into every worker (LoRA merged on the fly, or its adapter alone with `lora_rank`);
        returns the seconds it took."""
        from argym.agents.vllm import hf_state_dict, is_peft

        t0 = time.perf_counter()
        if self.adapter_sync and is_peft(model):
            self._load_adapter(model)
            return time.perf_counter() - t0
        self._base_sent = False  # merged weights: the next adapter sync sends the base again
        state = {k: v.detach().to("cpu") for k, v in hf_state_dict(model).items()}
        self.sync_bytes = sum(v.numel() * v.element_size() for v in state.values())
        ref = self._ray.put(state)
        counts = self._get([w.load.remote(ref) for w in self._workers], self.call_timeout_s, "load weights")
        if min(counts) != len(state):
            raise InfrastructureError(f"Ray generators loaded {counts} tensors, expected {len(state)}.")
        return time.perf_counter() - t0

    def _load_adapter(self, model: Any) -> None:
        """The adapter's files (peft writes them) to every engine through the object store; the base weights
        with the first."""
        from argym.agents.vllm import hf_state_dict

        with tempfile.TemporaryDirectory(prefix="argym-lora-") as d:
            model.save_pretrained(d)
            files = {p.name: p.read_bytes() for p in Path(d).iterdir() if p.is_file()}
        base = None
        if not self._base_sent:
            base = {k: v.detach().to("cpu") for k, v in hf_state_dict(model, merge=False).items()}
        self.sync_bytes = sum(len(b) for b in files.values()) + sum(
            v.numel() * v.element_size() for v in (base or {}).values()
        )
        files_ref, base_ref = self._ray.put(files), self._ray.put(base)  # once for every worker
        counts = self._get(
            [w.load_adapter.remote(files_ref, base_ref) for w in self._workers],
            self.call_timeout_s,
            "load the adapter",
        )
        if min(counts) != len(files):
            raise InfrastructureError(f"Ray generators took {counts} adapter files, expected {len(files)}.")
        self._base_sent = True

    def engine_pids(self) -> list[int]:
        """Every worker's vLLM engine processes, as each actor saw them start (the actors are the raylet's
        children, not necessarily the driver's: ask them, not the driver's process tree)."""
        pids = self._get(
            [w.engine_pids.remote() for w in self._workers], self.call_timeout_s, "list its engine"
        )
        return [pid for worker in pids for pid in worker]

    def close(self) -> None:
        """Stop the workers (a vLLM engine first, waiting up to a minute), then kill their actors."""
        try:
            self._ray.wait(
                [w.close.remote() for w in self._workers], num_returns=len(self._workers), timeout=60
            )
        finally:
            for w in self._workers:
                self._ray.kill(w)
            self._workers = []
