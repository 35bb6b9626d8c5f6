"""`argym export` (issue 44, item 9): a trained run's policy as a directory to upload to the Hugging Face Hub,
which transformers and `argym eval` load as it is, with a model card; run from a scratch directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..tiny_run import TINY_RUN

CLI = [sys.executable, "-m", "argym.cli"]


def argym(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def test_export_writes_an_uploadable_model_directory(tmp_path):
    out = argym(
        "train",
        *TINY_RUN,
        *["steps=1", "eval.episodes=2", "rollout.tasks_per_step=2", "rollout.group_size=2"],
        *["rollout.max_new_tokens=8", "out_dir=run"],
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    out = argym("export", "run", "hub/my-model", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "hf upload ORG/NAME hub/my-model" in out.stdout
    hub = tmp_path / "hub" / "my-model"
    names = {p.name for p in hub.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "argym_config.yaml"} <= names
    assert "trainer_state.pt" not in names  # optimizer and trainer state stay in the run

    card = (hub / "README.md").read_text()
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["library_name"] == "transformers" and "argym" in meta["tags"]
    assert "argym/Math-v0" in card and "| before training (step 0) |" in card and "best checkpoint" in card

    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tokenizer = AutoModelForCausalLM.from_pretrained(hub), AutoTokenizer.from_pretrained(hub)
    prompt = tokenizer("What is 1 + 1?", return_tensors="pt")
    assert model.generate(**prompt, max_new_tokens=2).shape[1] > prompt["input_ids"].shape[1]
    again = argym("export", "run", "hub/my-model", cwd=tmp_path)  # a non-empty directory is not overwritten
    assert again.returncode == 2 and "not empty" in again.stderr and "Traceback" not in again.stderr
    from argym.algorithms.export import export_checkpoint
    from argym.errors import ConfigError

    last = export_checkpoint(tmp_path / "run", tmp_path / "hub" / "last", checkpoint="last")
    assert "the last one written" in (last / "README.md").read_text()
    with pytest.raises(ConfigError, match="No policy checkpoint under 'nowhere'"):
        export_checkpoint("nowhere", tmp_path / "hub" / "x")
