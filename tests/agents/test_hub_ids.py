"""Hugging Face Hub model ids (issue 44, item 9): ``hf:ORG/NAME`` and ``policy.path=ORG/NAME`` load the model
from the local Hub cache, offline, as transformers would; a model not in the cache is one clear line that says
how to get its weights (argym never downloads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "argym.cli"]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cached_tiny_model(cache: Path, repo_id: str) -> Path:
    """A small model saved into `cache` in the Hub cache's own layout (refs/main → snapshots/COMMIT)."""
    from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    tokenizer = build_tiny_tokenizer()
    model = build_tiny_model(
        tokenizer, TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
    )
    model.save_pretrained(snapshot)
    tokenizer.save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def run(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def test_a_hub_id_in_the_local_cache_loads_and_one_not_cached_says_how_to_get_it(tmp_path):
    cache = tmp_path / "hub"
    snapshot = cached_tiny_model(cache, "argym-test/tiny-chat")
    out = run(
        *[
            "eval",
            "argym/Math-v0",
            "--agent",
            "hf:argym-test/tiny-chat",
            "--episodes",
            "2",
            "--out",
            "r.json",
        ],
        cwd=tmp_path,
        cache=cache,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["agent"] == "hf:argym-test/tiny-chat" and result["n"] == 2
    assert result["agent_info"]["model"] == "argym-test/tiny-chat" and result["agent_info"]["fingerprint"]
    assert (snapshot / "config.json").is_file() and not (
        tmp_path / "argym-test"
    ).exists()  # only the cache has it

    out = run("eval", "argym/Math-v0", "--agent", "hf:argym-test/not-downloaded", cwd=tmp_path, cache=cache)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "not-downloaded" in out.stderr and "local cache" in out.stderr
    assert "hf download argym-test/not-downloaded" in out.stderr, out.stderr
