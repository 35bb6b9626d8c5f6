"""FSDP2 for multi-process training (`algorithm.fsdp: true`): gradients and AdamW state sharded over the processes.

torch's `fully_shard` (FSDP2, https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html)
is called directly, not through accelerate's FSDP plugin: accelerate 1.15 switches the plugin
on for GPU-like backends only, so processes on the CPU (gloo) would silently run DDP and the
path could not be tested without GPUs. Each transformer block is one FSDP unit and the root
holds the rest (embeddings, final norm, head), the units accelerate and torchtitan use.

The parameters are kept gathered (unsharded) on every rank between optimizer steps, and
the gradients are reduce-scattered once per mini-batch. Every rank generates its rollouts
with the HF backend, a different number of tokens each, and the main process evaluates alone:
an all-gather per forward would hang them, so forwards here issue no collective. The
collectives are the optimizer step's (one reduce-scatter of the gradients, the norm for
clipping, one all-gather of the new weights), which every rank takes together, as under DDP.
What is sharded is the gradients once reduce-scattered and AdamW's two moments, three of the four
copies of the parameters that training holds; the weights stay whole, as generation needs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from argym.errors import ConfigError

if TYPE_CHECKING:
    from accelerate import Accelerator
    from torch.distributed.fsdp import FSDPModule

    from argym.algorithms.value import Critic


def shard(model: nn.Module, device_type: str) -> None:
    """`fully_shard` each transformer block, then the root, over all processes. Build the optimizer over
    the sharded parameters now, then `gather` the weights."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # transformers names a model's blocks in `_no_split_modules` (accelerate's default FSDP wrap policy)
    block_types = set(getattr(model, "_no_split_modules", None) or [])
    blocks = [m for m in model.modules() if type(m).__name__ in block_types]
    if not blocks:
        raise ConfigError(
            f"algorithm.fsdp: {type(model).__name__} names no transformer block in `_no_split_modules`; "
            "train it with DDP (algorithm.fsdp=false)."
        )
    mesh = init_device_mesh(device_type, (dist.get_world_size(),))
    for block in blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


def _units(model: nn.Module) -> list[FSDPModule]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


def gather(model: nn.Module) -> None:
    """Unshard every unit and keep it whole through forwards and backwards: a forward then issues no
    collective. Every rank calls it at the same point (it all-gathers)."""
    for unit in _units(model):
        unit.set_reshard_after_forward(False, recurse=False)
        unit.set_reshard_after_backward(False, recurse=False)
        unit.unshard()


def refresh(model: nn.Module) -> None:
    """After an optimizer step on the shards: gather the new weights (the whole ones are a copy)."""
    with sharded(model):
        pass


@contextlib.contextmanager
def sharded(model: nn.Module) -> Iterator[None]:
    """The model's sharded parameters registered (while gathered, the module holds the whole copies,
    which the optimizer and the state-dict functions do not know), then the weights gathered again."""
    for unit in _units(model):
        unit.reshard()
    yield
    gather(model)


def set_gradient_sync(model: nn.Module, sync: bool) -> None:
    """Reduce-scatter the gradients in the next backward (True) or accumulate them whole (False), as DDP's
    `no_sync` does for all but a mini-batch's last micro-batch."""
    from torch.distributed.fsdp import FSDPModule

    assert isinstance(model, FSDPModule)
    model.set_requires_gradient_sync(sync, recurse=True)


def clip_grad_norm(params: list[Tensor], max_norm: float) -> Tensor:
    """Clip the sharded gradients to the global norm (all-reduced over the shards); that norm, before clipping."""
    from torch.distributed.tensor import DTensor

    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return norm.full_tensor() if isinstance(norm, DTensor) else norm


def _options() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # full tensors on the CPU of rank 0 (the others get an empty dict): the main process writes them
    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_weights(model: nn.Module) -> dict[str, Tensor]:
    """The whole state dict, on the main process's CPU, for an ordinary HF checkpoint. All ranks call it."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    with sharded(model):
        weights = get_model_state_dict(model, options=_options())
    return cast("dict[str, Tensor]", weights)  # a module's state dict: tensors only


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's whole state keyed by parameter name, on the main process. All ranks call it."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    with sharded(model):
        state: dict[str, Any] = get_optimizer_state_dict(model, optimizer, options=_options())
    return state


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Each rank takes its shard of a whole optimizer state (`full_optimizer_state`) read from disk."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    with sharded(model):
        set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))


def check(accelerator: Accelerator, ref_model: nn.Module | None, critic: Critic | None) -> None:
    """What `algorithm.fsdp` does not shard yet is refused (the trainer's `check_processes` says so earlier)."""
    problems = []
    if ref_model is not None:
        problems.append("a KL reference model (kl_coef > 0) is not sharded")
    if critic is not None:
        problems.append("a critic (advantage needing values, VAPO) is not sharded")
    if accelerator.mixed_precision != "no":
        problems.append(
            f"mixed_precision={accelerator.mixed_precision!r}: FSDP's own mixed precision is not set up"
        )
    if problems:
        raise ConfigError(
            "algorithm.fsdp: "
            + "; ".join(problems)
            + ". Train with DDP (algorithm.fsdp=false) (docs/scaling.md)."
        )
