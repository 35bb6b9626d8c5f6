"""The transformers backend: any local Hugging Face checkpoint as a token-in, token-out policy.

Generation is batched with left padding; each completion keeps the exact
generated ids up to and including the first end-of-turn token, with the
sampler's log-probs: those of the distribution each token was drawn from
(`Completion.logprobs`), read from transformers' processed scores (temperature
and top-p applied, the nucleus renormalised), as vLLM's `processed_logprobs`.

As a run's `Generator` (agents/policy.py) it is the trained policy itself, whose weights the learner
updates in place (`load_weights` then has nothing to do), or in async mode its `copy`, which samples
while the learner updates the original and takes the new weights between two generate calls.

The compiled fast path (`compiled=True`, `rollout.backend: hf-compiled`) is
transformers' own: a static KV cache and a `torch.compile`d forward (CUDA
graphs on a GPU, transformers' "reduce-overhead"). Batch sizes are padded to
a power of two and prompt widths to a multiple of `WIDTH_BUCKET`, so a few
compiled graphs serve every call; the padding rows are dropped. If compiling
fails, the policy logs one line and generates eagerly from then on.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from argym.agents.policy import Completion, SamplingParams
from argym.agents.renderer import ChatRenderer

log = logging.getLogger(__name__)

WIDTH_BUCKET = 64
"""Compiled path: prompt widths are left-padded to a multiple of this (fewer distinct graph shapes)."""

ADAPTER_DIR = "adapter"
"""Where a LoRA policy's checkpoint keeps its adapter, inside the merged checkpoint directory."""


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer a checkpoint saved, exactly.

    Where `tokenizer.json` exists it is the serialised pipeline and is loaded as
    is: transformers 5's `AutoTokenizer` rebuilds a tokenizer from the model type
    (a Qwen2 config gets `Qwen2Tokenizer`), which silently drops the tiny
    policy's whitespace tokens.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(path)
    if (path / "tokenizer.json").is_file():
        return PreTrainedTokenizerFast.from_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No "Loading weights" bar and no deprecation notices from transformers while argym loads a checkpoint:
    they are about transformers' internals, not the user's run, and a bar per load floods a log file.
    Errors still show; the user's own verbosity is restored after."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # transformers' deprecations are FutureWarnings
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


class HFPolicy:
    """A causal LM and its tokenizer; `model` is trained in place by the learner."""

    weights_dtype = None
    """`Generator.weights_dtype`: weights are loaded as the learner holds them."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "", compiled: bool = False):
        self.model = model
        self.compiled = compiled
        """Generate through transformers' static cache + torch.compile (falls back to eager on failure)."""
        self.batch_size = 256
        """Prompts per `generate` chunk, each chunk seeded ``seed + start`` (`rollout.generate_batch`)."""
        self.shared_prefill = True
        """Prefill each distinct prompt of a chunk once (a GRPO group repeats its prompt `group_size` times);
        False: every row, as transformers does."""
        self.tokenizer = tokenizer
        self.name = name
        self.renderer = ChatRenderer(tokenizer)
        if tokenizer.pad_token_id is None:  # SmolLM2's tokenizer defines none
            tokenizer.pad_token = tokenizer.eos_token
        self.pad_id = int(tokenizer.pad_token_id)
        self.stop_ids = sorted(
            {self.renderer.eos_id, *([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])}
        )

    @classmethod
    def load(cls, path: str | Path, dtype: str = "float32", device: str = "cpu") -> HFPolicy:
        from transformers import AutoModelForCausalLM

        from argym.agents.models import resolve_checkpoint

        path = resolve_checkpoint(path)
        with quiet_transformers():
            tokenizer = load_tokenizer(path)
            model: torch.nn.Module = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
        return cls(model.to(device), tokenizer, name=str(path))

    def save(self, path: str | Path, state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """An ordinary HF checkpoint in `path`; `state_dict`: the weights to write instead of the model's own
        (a sharded model's, gathered: algorithms/fsdp.py)."""
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one bar per checkpoint drowns the run's own progress
        if hasattr(self.model, "peft_config"):
            assert state_dict is None, "a LoRA policy is not sharded (algorithms/processes.py)"
            # LoRA: `path` stays an ordinary (merged) checkpoint that every agent loads; the
            # adapter goes beside it for resuming (algorithms/lora.py)
            self.model.save_pretrained(Path(path) / ADAPTER_DIR)
            copy.deepcopy(self.model).merge_and_unload().save_pretrained(path)
        else:
            self.model.save_pretrained(path, state_dict=state_dict)
        self.tokenizer.save_pretrained(path)

    def copy(self) -> HFPolicy:
        """A policy with its own copy of the weights, to generate with while the learner updates this one."""
        twin = HFPolicy(copy.deepcopy(self.model), self.tokenizer, name=self.name, compiled=self.compiled)
        twin.batch_size, twin.shared_prefill = self.batch_size, self.shared_prefill
        return twin

    def load_weights(self, model: torch.nn.Module) -> float | None:
        """`Generator.load_weights`: copy `model`'s weights into this policy's model; None when `model` is that
        model (the trained policy generating itself: the learner's updates are already here)."""
        if model is self.model:
            return None
        t0 = time.perf_counter()
        copy_weights(model, self.model)
        return time.perf_counter() - t0

    def close(self) -> None:
        """Nothing to release: the model is an ordinary module of this process."""

    @property
    def device(self) -> torch.device:
        first: torch.nn.Parameter = next(self.model.parameters())
        return first.device

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        sampling: SamplingParams,
        seed: int | None = None,
        batch_size: int | None = None,
    ) -> list[Completion]:
        """One completion per prompt (see `TokenPolicy.generate`), in chunks of `batch_size` (default
        `self.batch_size`) seeded ``seed + start``."""
        out: list[Completion] = []
        batch_size = batch_size or self.batch_size
        for start in range(0, len(prompts), batch_size):
            out.extend(
                self._generate_batch(
                    prompts[start : start + batch_size], sampling, None if seed is None else seed + start
                )
            )
        return out

    def _generate_batch(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int | None
    ) -> list[Completion]:
        if not prompts:
            return []
        compiled = self.compiled
        rows, width = len(prompts), max(len(p) for p in prompts)
        if compiled:  # bucketed shapes: a compiled graph is reused across calls
            rows, width = 1 << (rows - 1).bit_length(), -(-width // WIDTH_BUCKET) * WIDTH_BUCKET
        ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i in range(rows):  # left padding; padding rows repeat the first prompt and are dropped
            p = prompts[i] if i < len(prompts) else prompts[0]
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        greedy = sampling.temperature <= 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=sampling.max_new_tokens,
            do_sample=not greedy,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            output_scores=True,
            return_dict_in_generate=True,
            # transformers syncs every token over the processes for an FSDP model, which would hang ranks that
            # generate alone (evaluation) or different numbers of batches; argym's FSDP keeps the weights
            # gathered between updates, so a forward needs no other rank (algorithms/fsdp.py)
            synced_gpus=False,
        )
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        was_training = self.model.training
        self.model.eval()
        try:
            if self.shared_prefill and not compiled:
                kwargs.update(self._shared_prefill(ids, mask))
            result = self._run_generate(ids, mask, kwargs, seed, compiled)
        finally:
            if was_training:
                self.model.train()
        drawn = result.sequences[: len(prompts), width:]  # (B, T_new), on the model's device
        # scores: the logits after the processors, i.e. / T and −inf outside the top-p nucleus when sampling
        # (unchanged logits when greedy), so their softmax is the distribution each token was drawn from.
        # One step at a time, where the scores are: stacking them first copies (B, T_new, V) floats (1.2 GB for
        # 64 × 96 tokens of a 49k vocabulary) and took 10x as long on the CPU; on a GPU it also moved them all
        # to the host. The values are the same to the bit.
        logprobs = torch.stack(
            [
                torch.log_softmax(step[: len(prompts)].float(), dim=-1)
                .gather(-1, drawn[:, t : t + 1])
                .squeeze(-1)
                for t, step in enumerate(result.scores)  # step: (B_padded, V)
            ],
            dim=1,
        ).cpu()  # (B, T_new)
        new = drawn.cpu()
        stop = torch.tensor(self.stop_ids)
        completions = []
        for i in range(len(prompts)):
            row = new[i]
            hits = torch.isin(row, stop).nonzero()
            if len(hits):
                n, reason = int(hits[0]) + 1, "stop"
            else:
                n, reason = len(row), "length"
            token_ids = row[:n].tolist()
            text_ids = token_ids[:-1] if reason == "stop" else token_ids
            completions.append(
                Completion(
                    token_ids=token_ids,
                    logprobs=logprobs[i, :n].tolist(),
                    finish_reason=reason,
                    text=self.renderer.decode(text_ids),
                )
            )
        return completions

    def _shared_prefill(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, Any]:
        """A KV cache of every prompt but its last token, computed once per distinct prompt and copied to the
        rows that repeat it, for `generate` to go on from (it then runs the last prompt token of each row,
        and samples as it would have). Empty, to prefill as usual, when fewer than half the rows repeat
        another: the copies then cost about what they save."""
        rows, width = ids.shape
        if width < 2:
            return {}
        distinct, inverse = torch.unique(torch.cat([ids, mask], dim=1), dim=0, return_inverse=True)
        if 2 * len(distinct) > rows:
            return {}
        u_ids, u_mask = distinct[:, :width], distinct[:, width:]
        # positions as generate derives them under left padding (pads at 1), so the cached keys are the same
        positions = (u_mask.cumsum(-1) - 1).masked_fill(u_mask == 0, 1)
        device = self.device
        out = self.model(
            input_ids=u_ids[:, :-1].to(device),
            attention_mask=u_mask[:, :-1].to(device),
            position_ids=positions[:, :-1].to(device),
            use_cache=True,
        )
        cache = out.past_key_values
        cache.batch_select_indices(inverse.to(device))
        return {"past_key_values": cache}

    def _run_generate(
        self, ids: torch.Tensor, mask: torch.Tensor, kwargs: dict[str, Any], seed: int | None, compiled: bool
    ) -> Any:
        """`model.generate`, through the compiled path when asked; a failed compile falls back to eager."""
        if compiled:
            try:
                if seed is not None:
                    torch.manual_seed(seed)
                return self.model.generate(
                    input_ids=ids.to(self.device),
                    attention_mask=mask.to(self.device),
                    cache_implementation="static",
                    compile_config=self._compile_config(),
                    **kwargs,
                )
            except Exception as e:  # a model, device or toolchain torch.compile cannot handle
                log.warning(
                    "compiled generation failed (%s: %s); generating eagerly from now on",
                    type(e).__name__,
                    str(e).splitlines()[0] if str(e) else "",
                )
                self.compiled = False
        if seed is not None:
            torch.manual_seed(seed)
        return self.model.generate(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **kwargs
        )

    def _compile_config(self) -> Any:
        from transformers import CompileConfig

        on_gpu = self.device.type == "cuda"
        config = CompileConfig(
            fullgraph=False, dynamic=False, mode="reduce-overhead" if on_gpu else "default"
        )
        # transformers compiles only on accelerators unless told by this flag (a class attribute it types None)
        vars(config)["_compile_all_devices"] = True
        return config


@torch.no_grad()
def copy_weights(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Copy every parameter and buffer of `source` into the same-named one of `target`, in place."""
    src = dict(source.named_parameters()) | dict(source.named_buffers())
    for name, t in list(target.named_parameters()) + list(target.named_buffers()):
        if name not in src:
            raise ValueError(
                f"copy_weights: {name!r} is in the generator's model but not in the trained one."
            )
        t.copy_(src[name])
