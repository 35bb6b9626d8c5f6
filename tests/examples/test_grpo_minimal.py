"""examples/grpo_minimal.py runs as a script: two small GRPO steps, one metrics line each."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "grpo_minimal.py"


def test_two_steps_print_metrics_and_exit_0():
    args = ["--steps", "2", "--warm-start-steps", "0", "--tasks-per-step", "2", "--group-size", "2"]
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), *args, "--max-new-tokens", "4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [m["step"] for m in lines] == [1, 2], out.stdout
    for m in lines:
        assert 0.0 <= m["train/reward"] <= 1.0
        assert {"train/loss", "train/clip_frac", "train/grad_norm"} <= m.keys()
        assert m["train/response_tokens"] <= 4
