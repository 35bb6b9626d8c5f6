"""What a training run is built from: its seeds, its policy, the generator of its rollouts, and the
agent spec that names it on the board. The `Trainer` assembles a run from these."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from argym.agents.hf import ADAPTER_DIR, HFPolicy
from argym.agents.tiny import build_tiny_model, build_tiny_tokenizer
from argym.algorithms.config import TrainConfig
from argym.algorithms.lora import AdapterOffReference, apply_lora

from argym.errors import ConfigError

if TYPE_CHECKING:
    from accelerate import Accelerator
    from argym.algorithms.learner import Learner
    from torch import nn

    from argym.cluster import Cluster
    from argym.cluster.learner import RayLearner


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


def build_reference(
    cfg: TrainConfig, policy: HFPolicy, run_dir: Path, accelerator: Accelerator, console: Any, resumed: bool
) -> nn.Module:
    """GRPO's KL reference: the policy as it starts RL (after the warm start), frozen.

    It is saved once in `run_dir/reference/`, so a resumed run keeps the same
    reference rather than copying the resumed policy. A LoRA policy needs no
    copy: its reference is the same model with the adapters off.
    """
    if cfg.policy.lora_r > 0:
        return AdapterOffReference(policy.model)
    path = run_dir / "reference"
    if resumed:
        if (path / "config.json").is_file():
            from transformers import AutoModelForCausalLM

            saved: nn.Module = AutoModelForCausalLM.from_pretrained(
                path, dtype=getattr(torch, cfg.policy.dtype)
            )
            return saved.to(accelerator.device)
        console.print(f"[yellow]No saved KL reference in {path}; using the resumed policy as reference.[/]")
    ref = copy.deepcopy(policy.model)
    if not resumed and accelerator.is_main_process:
        ref.save_pretrained(path)
    accelerator.wait_for_everyone()
    return cast("nn.Module", ref)


def build_learner(
    cfg: TrainConfig,
    policy: HFPolicy,
    accelerator: Accelerator,
    cluster: Cluster | None,
    ref_model: nn.Module | None,
) -> Learner | RayLearner:
    """The run's learner over `policy`: in this process, or in a Ray actor (`cluster.learner`: the updates
    there, `policy` kept in sync); with VAPO's critic, a value model on the policy's architecture with its own
    weights and lr, when the advantage estimator needs values."""
    from argym.algorithms.learner import Learner
    from argym.algorithms.registry import ADVANTAGES
    from argym.algorithms.value import Critic, ValueModel

    needs_values = ADVANTAGES.get(cfg.algorithm.advantage).needs_values
    value_model = ValueModel.from_policy(policy.model) if needs_values else None
    if cluster is not None and cfg.cluster.learner:
        return cluster.learner(
            policy.model, cfg.algorithm, cfg.policy.mixed_precision, ref_model, value_model
        )
    critic = Critic(value_model, cfg.algorithm, accelerator) if value_model is not None else None
    return Learner(policy.model, cfg.algorithm, accelerator, ref_model=ref_model, critic=critic)
