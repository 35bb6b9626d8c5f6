"""LoRA through `peft`, as TRL users set it up (`lora_r`, `lora_alpha`, ... in the policy config).

Three things differ from full fine-tuning and live here:
- the adapters wrap the policy *before* the supervised warm start, so the base
  weights never change and can always be rebuilt from the config (the tiny
  model from its seed, a checkpoint from its path);
- the KL reference is the same model with its adapters switched off (no copy of
  the weights), as TRL does for peft models;
- a checkpoint's `policy/` stays an ordinary merged Hugging Face checkpoint that
  every agent spec loads, and `policy/adapter/` holds the adapter for resuming
  (`HFPolicy.save`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from argym.errors import ConfigError


def apply_lora(
    model: nn.Module,
    r: int,
    alpha: int,
    dropout: float,
    target_modules: list[str] | None,
    adapter_dir: Path | None = None,
) -> nn.Module:
    """Wrap `model` with trainable LoRA adapters: fresh ones, or those saved in `adapter_dir` (resume)."""
    try:
        import peft
    except (
        ImportError
    ) as e:  # a user's mistake, not argym's: one line naming the extra (not "internal error")
        raise ConfigError(
            "policy.lora_r > 0 trains LoRA adapters, which needs peft: pip install 'argym[peft]' "
            "(or set policy.lora_r=0 to train every weight)."
        ) from e
    if adapter_dir is not None:
        return peft.PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=True)
    config = peft.LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        bias="none",
        task_type="CAUSAL_LM",
        target_modules=target_modules or "all-linear",
    )
    return peft.get_peft_model(model, config)


class AdapterOffReference(nn.Module):
    """The KL reference of a LoRA policy: the policy's forward with its adapters disabled.

    It registers no parameters of its own (the peft model is held outside
    `nn.Module`'s registry), so freezing or preparing the reference can never
    touch the trained adapters.
    """

    def __init__(self, peft_model: nn.Module):
        from peft import PeftModel

        super().__init__()
        assert isinstance(peft_model, PeftModel), "a LoRA policy's model is the peft model `apply_lora` made"
        self._peft = [peft_model]  # a list, not an attribute: keeps it out of .parameters()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        model = self._peft[0]
        with model.disable_adapter():
            return model(*args, **kwargs)
