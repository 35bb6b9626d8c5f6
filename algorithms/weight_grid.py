"""The learner's weights kept on the sampler's grid: float32 master weights, the policy in the sampler's dtype.

A float32 learner whose rollouts come from a bfloat16 engine (vLLM's fast CPU
kernels) otherwise trains a policy the engine cannot hold. `load_weights`
rounds each weight to bf16 (8 significant bits), and an update smaller than
half a bf16 step is lost there: AdamW moves every weight by about `lr` per
step, less than half a step of any weight above ~64·lr in magnitude (above
~0.001 at lr 2e-5), most of a model's. Full fine-tuning thus moves the
learner's float32 policy away from the engine's rounded one step after step:
SmolLM2 at lr 1e-4, one step moved the learner 0.57 nats per sampled token
from the engine, while the same learner with its weights rounded to bf16 stayed
within 0.03 (the compute gap), the logged `train/logprob_mismatch_mean` growing
with it (BENCHMARKS.md, "SmolLM2 learns").

`SamplerGrid` is mixed-precision training's master weights: the model's
trainable parameters always hold values the sampler's dtype represents exactly
(stored in their own float32), and the optimizer steps on float32 copies (the
masters), so updates below a bf16 step accumulate there until they move the
rounded weight. The learner's π_old, its training forward and its gradient
are then those of the weights the engine runs, which receives them without
loss; what is left of the mismatch is the engines' compute.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch
from torch import Tensor, nn


def narrower(sampler: torch.dtype, params: Iterable[nn.Parameter]) -> bool:
    """Whether some of `params` hold more precision than `sampler`'s dtype (float32 weights, a bf16 engine)."""
    if not sampler.is_floating_point:
        return False
    eps = torch.finfo(sampler).eps
    return any(p.dtype.is_floating_point and torch.finfo(p.dtype).eps < eps for p in params)


class SamplerGrid:
    """Float32 masters of `params`; the parameters themselves rounded to `dtype` (values kept in their dtype).

    Wrap the optimizer's step in `stepping()`: the masters go into the
    parameters for the step, and the stepped values come back out rounded.
    """

    def __init__(
        self, params: Iterable[nn.Parameter], dtype: torch.dtype, masters: list[Tensor] | None = None
    ):
        self.params = list(params)
        self.dtype = dtype
        if masters is not None and [m.shape for m in masters] != [p.shape for p in self.params]:
            raise ValueError("The saved master weights do not match the model's trainable parameters.")
        with torch.no_grad():
            self.masters = [
                (m if masters is not None else p).detach().to(p.device, p.dtype, copy=True)
                for p, m in zip(self.params, masters or self.params)
            ]
        self.round()

    @torch.no_grad()
    def round(self) -> None:
        """Each parameter := its master rounded to the sampler's dtype (nearest, as the engine's load does)."""
        for p, m in zip(self.params, self.masters):
            p.copy_(m.to(self.dtype))

    @torch.no_grad()
    def round_copy(self, copy: nn.Module, model: nn.Module) -> None:
        """`copy`'s weights named as this grid's parameters in `model` rounded to the sampler's dtype too: a
        KL reference copied from the float32 policy is then the policy the sampler starts from."""
        mine = {id(p) for p in self.params}
        names = {name for name, p in model.named_parameters() if id(p) in mine}
        for name, p in copy.named_parameters():
            if name in names and id(p) not in mine:  # a reference sharing the weights (LoRA's) is left
                p.copy_(p.to(self.dtype))

    @contextlib.contextmanager
    def stepping(self) -> Iterator[None]:
        """The optimizer steps on the masters: they are put into the parameters, kept after, then rounded."""
        with torch.no_grad():
            for p, m in zip(self.params, self.masters):
                p.copy_(m)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, m in zip(self.params, self.masters):
                    m.copy_(p)
            self.round()
