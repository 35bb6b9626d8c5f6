"""What a training run is built from: its seeds, its policy, the generator of its rollouts, and the
agent spec that names it on the board. The `Trainer` assembles a run from these."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from argym.agents.hf import ADAPTER_DIR, HFPolicy
from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
from argym.algorithms.config import TrainConfig
from argym.algorithms.lora import apply_lora

from argym.errors import ConfigError

if TYPE_CHECKING:
    from argym.cluster import Cluster


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def mixed_precision(setting: str) -> str:
    """accelerate's mixed_precision for `policy.mixed_precision` ("auto": bf16 on a GPU that has it)."""
    if setting == "auto":
        return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"
    return setting


def build_policy(cfg: TrainConfig, checkpoint: Path | None) -> HFPolicy:
    """The policy from the checkpoint if resuming, else freshly built or loaded.

    With LoRA the base is always rebuilt from the config (its weights never
    train) and the adapters come fresh or from the checkpoint's `policy/adapter/`.
    """
    pc = cfg.policy
    if checkpoint is not None and pc.lora_r == 0:
        return HFPolicy.load(checkpoint / "policy", dtype=pc.dtype)
    if pc.kind == "tiny":
        tok = build_tiny_tokenizer()
        policy = HFPolicy(build_tiny_model(tok, pc.tiny, seed=cfg.seed), tok, name="tiny")
    else:
        if pc.path is None:
            raise ConfigError("policy.kind: hf needs policy.path (a checkpoint directory or a model name).")
        policy = HFPolicy.load(pc.path, dtype=pc.dtype)
    if pc.lora_r > 0:
        adapter = checkpoint / "policy" / ADAPTER_DIR if checkpoint is not None else None
        policy.model = apply_lora(
            policy.model,
            pc.lora_r,
            pc.lora_alpha,
            pc.lora_dropout,
            pc.lora_target_modules,
            adapter_dir=adapter,
        )
    return policy


def build_generator(cfg: TrainConfig, policy: HFPolicy, run_dir: Path, cluster: Cluster | None = None) -> Any:
    """The token policy that generates rollouts (`rollout.backend`): the trained policy itself (eager or
    compiled generation), or a vLLM engine started from the run's checkpoint and synced to `policy` now;
    with `cluster.generators`, that many Ray actors generating with either."""
    backend = cfg.rollout.backend
    policy.compiled = backend == "hf-compiled"
    start = run_dir / "checkpoint" / "policy"  # an ordinary checkpoint (LoRA runs save it merged)
    if cluster is not None and cfg.cluster.generators:
        return cluster.generators(policy, start, cfg.rollout.vllm if backend == "vllm" else None)
    if backend != "vllm":
        return policy
    from argym.agents.vllm import VLLMPolicy

    generator = VLLMPolicy(start, cfg.rollout.vllm, name=f"vllm:{start}")
    generator.load_weights(policy.model)
    return generator


def run_agent_spec(cfg: TrainConfig, run_dir: Path) -> str:
    """The agent spec that reloads what this run evaluates: the board records it, and `argym eval` takes it.

    The policy's kind and the backend that generates name it (``tiny:``, ``hf:`` or ``vllm:`` over the
    run directory), and an agent program wraps it as ``program:MODULE:FN@SPEC``.
    """
    kind = "vllm" if cfg.rollout.backend == "vllm" else cfg.policy.kind
    spec = f"{kind}:{run_dir}"
    if cfg.rollout.strategy == "program" and cfg.agent.program:
        spec = f"program:{cfg.agent.program}@{spec}"
    return spec
