"""Data-parallel training over several processes (`accelerate launch`): what the trainer shares and checks.

Each process (rank) rolls out its own share of a step's groups with its own task
stream and seeds, and the learner averages gradients over all of them with a
normaliser summed over the global batch (algorithms/learner.py). The trainer then
needs three things written once: which configurations a multi-process run supports
(`check_processes`), the step's trajectories and metrics of every rank in one place for
the logs (`gather_step`), and one RNG state per rank in a checkpoint so a resume
continues each rank's streams exactly (`all_ranks` gathers them, `own_rng` picks one).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from argym.errors import ConfigError
from argym.types import Trajectory

if TYPE_CHECKING:
    from accelerate import Accelerator

    from argym.algorithms.config import TrainConfig


def make_accelerator(mixed_precision: str) -> Accelerator:
    """The run's `Accelerator`, one per process of an `accelerate launch` (or torchrun).

    accelerate treats torchrun-launched processes on a machine without a GPU as unrelated
    single processes (each would train alone on its own rollouts) unless it is told to use
    the CPU: then they form one gloo process group, as on GPUs they form an NCCL one.
    """
    import torch
    from accelerate import Accelerator

    launched = int(os.environ.get("WORLD_SIZE", "1"))
    accelerator = Accelerator(
        mixed_precision=mixed_precision, cpu=launched > 1 and not torch.cuda.is_available()
    )
    if accelerator.num_processes != launched:
        raise ConfigError(
            f"{launched} processes were launched (WORLD_SIZE) but accelerate joined {accelerator.num_processes}: "
            "launch with `accelerate launch --multi_gpu --num_processes N` (docs/scaling.md)."
        )
    return accelerator


def check_processes(cfg: TrainConfig, processes: int) -> None:
    """Refuse what a multi-process run does not support, with the reason and the way out.

    Every rank must take the same number of synchronised backward passes, so each must
    hold the same number of rows: `tasks_per_step` divides evenly and the rollout
    strategy yields exactly `group_size` samples per task (plain; R³L's retries and the
    Decomposer's extra turns vary per rank). The vLLM backend, async mode and Ray env
    workers keep one engine or one scheduler per run, which has not been split per rank.
    `algorithm.fsdp` also refuses the models it does not shard (`fsdp_problems`).
    """
    if processes == 1:
        return
    r = cfg.rollout
    problems = []
    if r.tasks_per_step % processes:
        problems.append(
            f"rollout.tasks_per_step={r.tasks_per_step} must be a multiple of the {processes} processes"
        )
    if r.strategy != "plain":
        problems.append(f"rollout.strategy={r.strategy!r} gives each process a different number of samples")
    if r.backend != "hf":
        problems.append(f"rollout.backend={r.backend!r}: only the hf backend is split over processes")
    if r.mode != "sync":
        problems.append("rollout.mode=async runs in one process")
    if cfg.cluster.address is not None:
        problems.append("cluster.address: Ray env workers serve one trainer process")
    if cfg.algorithm.fsdp:
        problems.extend(fsdp_problems(cfg))
    if problems:
        raise ConfigError(
            f"Training on {processes} processes (accelerate launch): " + "; ".join(problems) + ". "
            "Change these settings or train in one process (docs/scaling.md)."
        )


def fsdp_problems(cfg: TrainConfig) -> list[str]:
    """What `algorithm.fsdp` does not shard (algorithms/fsdp.py): each would need its own sharded copy or
    wrapping, and a model left whole beside the sharded policy would defeat the memory saving."""
    from argym.algorithms.registry import ADVANTAGES

    a, p = cfg.algorithm, cfg.policy
    problems = []
    if a.kl_coef > 0:
        problems.append("algorithm.fsdp with kl_coef > 0: the frozen KL reference model is not sharded")
    if ADVANTAGES.get(a.advantage).needs_values:
        problems.append(f"algorithm.fsdp with advantage={a.advantage!r}: the critic (VAPO) is not sharded")
    if p.lora_r > 0:
        problems.append("algorithm.fsdp with policy.lora_r > 0: peft's adapters are not sharded")
    if p.gradient_checkpointing:
        problems.append("algorithm.fsdp with policy.gradient_checkpointing: not tested together")
    if p.mixed_precision != "no":
        problems.append(
            f"algorithm.fsdp with policy.mixed_precision={p.mixed_precision!r}: FSDP's own mixed precision "
            "is not set up (use policy.dtype)"
        )
    return problems


def all_ranks(accelerator: Accelerator, obj: Any) -> list[Any]:
    """`obj` of every process, in rank order (one item when there is one process)."""
    if accelerator.num_processes == 1:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * accelerator.num_processes
    dist.all_gather_object(out, obj)
    return out


def gather_step(
    accelerator: Accelerator,
    trajs: list[Trajectory],
    advantages: list[float | None],
    metrics: dict[str, float],
) -> tuple[list[Trajectory], list[float | None], list[dict[str, float]]]:
    """Every rank's trajectories (group ids made distinct across ranks), their advantages, and each rank's
    metrics, so the main process logs the whole step. One process: returned as they are."""
    if accelerator.num_processes == 1:
        return trajs, advantages, [metrics]
    parts = all_ranks(accelerator, (trajs, advantages, metrics))
    all_trajs: list[Trajectory] = []
    all_adv: list[float | None] = []
    offset = 0
    for rank_trajs, rank_adv, _ in parts:
        all_trajs.extend(dataclasses.replace(t, group=t.group + offset) for t in rank_trajs)
        all_adv.extend(rank_adv)
        offset += max((t.group for t in rank_trajs), default=-1) + 1
    return all_trajs, all_adv, [m for _, _, m in parts]


def own_rng(saved: dict[str, Any], accelerator: Accelerator) -> dict[str, Any]:
    """This rank's RNG state from a checkpoint; a checkpoint of another process count cannot resume exactly."""
    ranks = saved.get("rng_ranks")
    n = len(ranks) if ranks is not None else 1
    if n != accelerator.num_processes:
        raise ConfigError(
            f"The checkpoint was written by a run on {n} process(es); this one has "
            f"{accelerator.num_processes}. Resume with the same number of processes, or start a new out_dir."
        )
    state: dict[str, Any] = ranks[accelerator.process_index] if ranks is not None else saved["rng"]
    return state
