"""Data-parallel training: `argym train` under `accelerate launch` with 2 CPU processes (gloo).

The learner's side (one update on 2 processes equals the single-process update) is
tested in test_learner.py; here the trainer's: each rank rolls out its share, the main
process logs the whole step, and a run killed with SIGKILL resumes exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from argym.algorithms.config import load_config
from argym.algorithms.processes import check_processes
from argym.errors import ConfigError

from ..tiny_run import TINY_RUN

RUN = [
    *TINY_RUN,
    "rollout.tasks_per_step=4",
    "rollout.group_size=3",
    "rollout.max_new_tokens=6",
    "eval.episodes=4",
    "algorithm.micro_batch_size=4",
    "algorithm.num_minibatches=2",
    "algorithm.entropy_coef=0.01",  # every step has a gradient, so a resume that differs shows
    "log.samples_per_step=100",  # every trajectory in samples.jsonl
    "checkpoint_every=5",
    "steps=30",  # long enough that the kill below lands mid-run
]


FSDP = "algorithm.fsdp=true"


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("rollout.tasks_per_step=3", "multiple of the 2 processes"),
        ("rollout.mode=async rollout.max_staleness=0", "async runs in one process"),
        ("rollout.strategy=r3l", "different number of samples"),
        ("cluster.address=local", "Ray env workers"),
        # what FSDP does not shard
        (f"{FSDP} algorithm.kl_coef=0.1", "KL reference model is not sharded"),
        (f"{FSDP} algo=vapo", "critic"),
        (f"{FSDP} policy.lora_r=4", "adapters are not sharded"),
        (f"{FSDP} policy.gradient_checkpointing=true", "gradient_checkpointing"),
        (f"{FSDP} policy.mixed_precision=bf16", "mixed precision"),
    ],
)
def test_multi_process_runs_refuse_what_they_cannot_split(override, said):
    with pytest.raises(ConfigError, match=said):
        check_processes(load_config(None, [*RUN, *override.split()]), 2)


def test_the_supported_multi_process_runs_pass():
    check_processes(load_config(None, RUN), 2)
    check_processes(load_config(None, [*RUN, FSDP]), 2)
    check_processes(
        load_config(None, [*RUN, FSDP, "algorithm.kl_coef=0.1"]), 1
    )  # one process: fsdp is ignored


MODES = {"ddp": [], "fsdp": [FSDP]}


def _launch(out: Path, tmp: Path, mode: str = "ddp") -> subprocess.Popen[str]:
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    # --multi_gpu starts torchrun; without a GPU accelerate runs the processes on the CPU over gloo
    cmd = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no", "-m", "argym.cli", "train"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp)}
    return subprocess.Popen(
        [*cmd, *RUN, *MODES[mode], f"out_dir={out}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-4000:]
    return out


def _logged_steps(run: Path) -> int:
    try:
        return len((run / "metrics.jsonl").read_text().splitlines())
    except FileNotFoundError:
        return 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode",
    [
        # FSDP in CI: the harder case (sharded optimizer state gathered into the checkpoint); DDP shares the rest
        pytest.param("ddp", marks=pytest.mark.full(reason="CI: fsdp here, DDP's update in test_learner.py")),
        "fsdp",
    ],
)
def test_two_processes_log_the_whole_step_and_resume_exactly_after_sigkill(tmp_path, mode):
    """DDP, and FSDP (whose ranks each generate with the gathered weights, a different number of tokens, and
    whose checkpoint gathers the weights and the sharded AdamW state onto the main process)."""
    from argym.agents.hf import HFPolicy

    straight, killed, tmp = tmp_path / "straight", tmp_path / "killed", tmp_path / "tmp"
    tmp.mkdir()
    _finish(_launch(straight, tmp, mode))

    proc = _launch(killed, tmp, mode)
    deadline = time.monotonic() + 600
    while _logged_steps(killed) < 6 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)  # step 6 logged: the step-5 checkpoint is written
    # the launcher and both ranks, mid-run (torchrun starts each rank in a session of its own, so the
    # launcher's process group does not hold them: they are found by their command line)
    subprocess.run(["pkill", "-KILL", "-f", f"out_dir={killed}"], check=False)
    proc.communicate(timeout=60)
    at_kill = torch.load(killed / "checkpoint" / "trainer_state.pt", weights_only=False)["step"]
    assert 5 <= at_kill < 30, at_kill
    # nothing of the killed ranks stays behind in the temp dir (no rank keeps a scratch dir of its own)
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("argym")], list(tmp.iterdir())
    _finish(_launch(killed, tmp, mode))  # resumes from the checkpoint

    def weights(run: Path) -> dict[str, torch.Tensor]:
        return HFPolicy.load(run / "checkpoint" / "policy").model.state_dict()

    a, b = weights(straight), weights(killed)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)

    def rows(run: Path, name: str) -> list[dict]:
        return [json.loads(x) for x in (run / name).read_text().splitlines()]

    ma, mb = rows(straight, "metrics.jsonl"), rows(killed, "metrics.jsonl")
    assert [r["step"] for r in mb if "train/loss" in r] == list(range(1, 31))
    for x, y in zip(ma, mb):
        for key in ("train/reward", "train/loss", "train/entropy", "train/response_tokens"):
            assert x.get(key) == y.get(key), (key, x["step"])
    # the main process logs both ranks' trajectories: 4 tasks x 3 samples a step, in 4 distinct groups
    samples = rows(straight, "samples.jsonl")
    for step in range(1, 31):
        mine = [s for s in samples if s["step"] == step]
        assert len(mine) == 12 and len({s["group"] for s in mine}) == 4, step
    assert rows(killed, "samples.jsonl") == samples
