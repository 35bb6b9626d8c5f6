"""The recipe's settings for agents' engines and programs (`rollout.vllm`, the `agent` section).

Plain dataclasses apart from the code they configure, so that reading a recipe (algorithms/config.py)
imports neither vLLM's engine wrapper nor the agent-program endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from argym.errors import ConfigError


@dataclass
class VLLMConfig:
    """Engine settings (vLLM's own names where they exist)."""

    dtype: str = "auto"
    """Weights' dtype in the engine: auto (the checkpoint's), bfloat16, float32."""
    max_model_len: int | None = None
    """Longest context; None: the model's."""
    kv_cache_gb: float = 1.0
    """CPU: memory for the KV cache (vLLM's VLLM_CPU_KVCACHE_SPACE)."""
    gpu_memory_utilization: float = 0.4
    """GPU: fraction of the device for the engine; the rest is the colocated learner's."""
    enforce_eager: bool = False
    """Skip torch.compile / CUDA graphs: much faster start, slower steps."""
    enable_sleep_mode: bool = False
    """GPU: allow `sleep()` to release weights and KV cache during learner updates."""
    in_process: bool | None = None
    """Run the engine and its one worker in this process (no engine-core and worker processes, each importing torch
    and vLLM again). SmolLM2, CPU, float32, eager, quiet 2-core machine: ready in 13.9 s instead of 42.6 s and
    89 instead of 55 generated tokens/s on 64 prompts (BENCHMARKS.md, "Generation on the CPU"). One GPU at most.
    None (the default): in process on the CPU, where it is faster in every figure measured; its own processes on
    a GPU, where the engine core's process overlaps scheduling with the model's steps."""
    seed: int = 0
    """Engine seed (each request also gets its own seed)."""
    lora_sync: str = "merged"
    """A LoRA run (`policy.lora_r` > 0): what each sync sends the engine. merged: the weights with the adapters
    merged in; adapter: the adapter alone (vLLM's LoRA adapters, `LoRARequest`; the base once), a fraction of the
    bytes, at the cost of LoRA kernels in every generate call (BENCHMARKS.md has both)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Any other `vllm.LLM` keyword argument, passed as is."""

    def __post_init__(self) -> None:
        if self.lora_sync not in ("merged", "adapter"):
            raise ConfigError(f"rollout.vllm.lora_sync must be merged or adapter, got {self.lora_sync!r}.")


@dataclass
class ProgramConfig:
    """The agent program a `rollout.strategy: program` run trains (the `agent` section)."""

    program: str = ""
    """``module:function`` (or ``path/to/file.py:function``): ``solve(task, client, tools) -> answer``."""
    reward: str = ""
    """Optional ``module:function``, ``reward(task, answer) -> float``, grading the answer instead of the env."""
    deadline_s: float = 300.0
    """Seconds one episode's program may run; past it the episode scores 0 and the step goes on."""
    concurrency: int = 64
    """Programs running at once."""

    def __post_init__(self) -> None:
        if self.deadline_s <= 0:
            raise ConfigError(f"agent.deadline_s must be > 0, got {self.deadline_s}.")
        if self.concurrency < 1:
            raise ConfigError(f"agent.concurrency must be >= 1, got {self.concurrency}.")
