"""What a run shows beyond its metrics: sample trajectories (samples.jsonl, TensorBoard text), the
cannot-learn warning, the heartbeat when output is not a terminal, the learner's per-sample advantages."""

from __future__ import annotations

import io
import json

import pytest
import torch
from accelerate import Accelerator
from rich.console import Console
from transformers import Qwen2Config, Qwen2ForCausalLM

from argym.algorithms.config import LearnerConfig, LogConfig, load_config
from argym.algorithms.learner import Learner
from argym.algorithms.metrics import MetricsLog
from argym.algorithms.step_log import StepLog
from argym.errors import ConfigError
from argym.types import Trajectory


def _traj(reward: float, group: int, text: str = "\\boxed{5}", **kw) -> Trajectory:
    return Trajectory(
        task_id=f"t{group}",
        messages=[{"role": "user", "content": "What is 2+3?"}, {"role": "assistant", "content": text}],
        reward=reward,
        success=reward > 0,
        turns=1,
        terminated=True,
        truncated=False,
        infos=[{"reward_parts": {"outcome": reward}, "verdict": {"parsed": "5", "correct": reward > 0}}],
        token_ids=[1, 2, 3, 5, 6],
        loss_mask=[0, 0, 0, 1, 1],
        group=group,
        **kw,
    )


def _log(tmp_path, console, **cfg) -> tuple[StepLog, MetricsLog]:
    metrics = MetricsLog(tmp_path)
    return StepLog(tmp_path, LogConfig(**cfg), console, metrics, steps=5), metrics


def test_samples_go_to_jsonl_and_tensorboard_text(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log, metrics = _log(tmp_path, Console(file=io.StringIO()), samples_per_step=2)
    trajs = [_traj(1.0, 0), _traj(0.0, 0, text="I give up"), _traj(0.0, 1), _traj(1.0, 1)]
    log.samples(1, trajs, [0.5, -0.5, -0.5, 0.5])
    metrics.close()
    rows = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [(r["step"], r["group"], r["advantage"]) for r in rows] == [(1, 0, 0.5), (1, 1, -0.5)]
    assert rows[0]["reward_parts"] == {"outcome": 1.0} and rows[0]["transcript"]["verdict"]["correct"] is True
    assert rows[0]["transcript"]["messages"][1]["content"] == "\\boxed{5}"
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0})
    acc.Reload()
    text = acc.Tensors("samples/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "advantage 0.5" in text and "boxed{5}" in text and "What is 2+3?" in text


def test_a_resumed_run_drops_the_samples_logged_after_its_checkpoint(tmp_path):
    (tmp_path / "samples.jsonl").write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n')
    StepLog(tmp_path, LogConfig(), Console(file=io.StringIO()), MetricsLog(tmp_path, tensorboard=False), 5, 2)
    assert (tmp_path / "samples.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'


def test_flat_groups_for_several_steps_warn_once_with_what_to_change(tmp_path):
    out = io.StringIO()
    log, _ = _log(tmp_path, Console(file=out, width=300), samples_per_step=0, zero_variance_steps=3)
    flat = [_traj(0.0, 0), _traj(0.0, 0), _traj(1.0, 1), _traj(1.0, 1)]
    log.samples(1, flat, [0.0] * 4)
    log.samples(2, flat, [0.0] * 4)
    log.samples(3, [_traj(0.0, 0), _traj(1.0, 0)], [0.0] * 2)  # a signal: the count starts again
    for step in (4, 5, 6, 7):
        log.samples(step, flat, [0.0] * 4)
    text = out.getvalue()
    assert text.count("warning:") == 1 and "to step 6" in text
    assert "rollout.group_size" in text and "sampling.dynamic=true" in text
    assert not (tmp_path / "samples.jsonl").exists()  # samples_per_step=0: none


def test_heartbeat_only_when_not_a_terminal(tmp_path):
    piped = io.StringIO()
    log, _ = _log(tmp_path, Console(file=piped), samples_per_step=0)
    log.beat(2, {"train/reward": 0.123456, "train/success": 0.25, "perf/update_s": 1.0}, 3.21)
    assert piped.getvalue().strip() == "step 2/5  reward 0.123  success 0.25  3.2s"
    tty = io.StringIO()
    log, _ = _log(tmp_path, Console(file=tty, force_terminal=True), samples_per_step=0)
    log.beat(2, {"train/reward": 0.5}, 1.0)
    assert tty.getvalue() == ""


def test_the_learner_reports_each_samples_advantage_none_for_an_infra_failure():
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=32,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
    )
    learner = Learner(model, LearnerConfig(lr=1e-3), Accelerator(cpu=True))
    trajs = [_traj(1.0, 0), _traj(0.0, 0), _traj(0.0, 1, infra_failure=True), _traj(0.0, 1), _traj(1.0, 1)]
    learner.update(trajs, pad_id=0)
    adv = learner.sample_advantages
    assert (
        adv[2] is None
        and adv[0] == pytest.approx(0.7071, abs=1e-3)
        and adv[1] == pytest.approx(-0.7071, abs=1e-3)
    )
    assert adv[3] == pytest.approx(-adv[4])


def test_log_settings_are_checked():
    with pytest.raises(ConfigError, match="samples_per_step"):
        load_config(None, ["log.samples_per_step=-1"])
    assert load_config(None, ["log.samples_per_step=5"]).log.samples_per_step == 5
