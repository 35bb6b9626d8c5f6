"""What argym prints besides its own output, as a user meets it (issue 44, item 8): an install without
setuptools' warnings, checkpoint loading without transformers' bars, a warning on one line, a missing
extra and a broken recipe each named in one line. CLI checks run from a scratch directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "argym.cli"]


def test_setuptools_builds_the_package_without_warnings(tmp_path):
    """The build step `pip install -e .` runs: the license as a TOML table and the data folders missing
    from `packages` each printed a warning block."""
    code = (
        "import sys; from setuptools import setup; "
        f"sys.argv = ['setup.py', '-q', 'build_py', '--build-lib', {str(tmp_path / 'lib')!r}]; setup()"
    )
    out = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    warned = [
        line
        for line in out.stderr.splitlines()
        if "Setuptools" in line or "_Warning" in line or "absent" in line
    ]
    assert not warned, out.stderr
    lib = tmp_path / "lib" / "argym"
    assert (lib / "envs" / "swe" / "data" / "instances.jsonl").is_file()  # the data still ships
    assert (lib / "envs" / "toolcall" / "data" / "documents.json").is_file()


def _run(tmp_path: Path, *args: str, python: list[str] = CLI) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [*python, *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300
    )


def test_loading_a_checkpoint_shows_no_transformers_bar(tmp_path, capfd):
    """`--agent tiny:RUN_DIR`, `hf:PATH` and a resumed run load through `HFPolicy.load`."""
    from argym.agents.hf import HFPolicy
    from argym.agents.spec import load_agent

    load_agent("tiny", seed=0).save(tmp_path / "saved")
    capfd.readouterr()
    HFPolicy.load(tmp_path / "saved")
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err, err


def test_a_warning_is_one_line_without_the_source_line(tmp_path):
    (tmp_path / "few.jsonl").write_text(
        "".join(json.dumps({"question": f"What is {i}+1?", "answer": str(i + 1)}) + "\n" for i in range(6))
    )
    out = _run(tmp_path, "eval", "argym/Math-v0", "tasks=few.jsonl", "split=all", "--agent", "oracle")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("argym: warning: few.jsonl: the hash split"), out.stderr


def test_lora_without_peft_names_the_extra(tmp_path):
    """peft absent (None in sys.modules: `import peft` raises ImportError, as when it is not installed)."""
    python = [
        sys.executable,
        "-c",
        "import sys; sys.modules['peft'] = None; from argym.cli import main; main()",
    ]
    args = ["train", "policy.lora_r=4", "warm_start.steps=0", "out_dir=run", "policy.tiny.num_layers=1"]
    out = _run(tmp_path, *args, python=python)
    assert out.returncode == 2, out.stderr
    assert "internal error" not in out.stderr and "pip install 'argym[peft]'" in out.stderr, out.stderr


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path):
    (tmp_path / "recipe.yaml").write_text("steps: 3\nalgorithm: {lr: 1e-4\nseed: 1\n")
    out = _run(tmp_path, "train", "recipe.yaml")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "recipe.yaml, line " in out.stderr and "starts at line 2" in out.stderr, out.stderr
