"""Weights & Biases beside TensorBoard (issue 44, item 9): with ``log.wandb=true`` (and W&B's own
``WANDB_MODE=offline``: no network) a run's step metrics and config land in its W&B run, read back here from the
run file W&B writes; without it nothing of W&B is touched."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer

from ..tiny_run import TINY_RUN

HEADER = 7  # ":W&B", a 2-byte magic, a version byte
BLOCK = 32768  # LevelDB's log format: records in 32 KiB blocks, each with a 7-byte header (crc, length, type)


def wandb_records(path: Path) -> list[Any]:
    """The protobuf `Record`s of a `.wandb` run file (LevelDB log records after W&B's header)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    out, pos, chunk = [], HEADER, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            break
        payload = data[pos + 7 : pos + 7 + length]
        chunk = payload if kind in (1, 2) else chunk + payload
        if kind in (1, 4):  # FULL or LAST
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunk)
            out.append(record)
        pos += 7 + length
    return out


def test_wandb_logs_each_step_and_the_config_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    overrides = [
        "steps=2",
        "eval.episodes=2",
        "rollout.tasks_per_step=2",
        "rollout.group_size=2",
        "log.wandb=true",
    ]
    cfg = load_config(None, [*TINY_RUN, *overrides, "rollout.max_new_tokens=8", f"out_dir={run}"])
    trainer = Trainer(cfg)
    try:
        trainer.fit()
    finally:
        trainer.close()
    [path] = run.glob("wandb/offline-run-*/run-*.wandb")
    deadline = time.monotonic() + 60
    while True:  # W&B's writer (its wandb-core process) may still be flushing when `finish` returns
        records = wandb_records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    history = {
        r.history.step.num: {
            i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item
        }
        for r in records
        if r.WhichOneof("record_type") == "history"
    }
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert sorted(history) == [1, 2] == [r["step"] for r in logged]
    for row in logged:
        assert history[row["step"]]["train/reward"] == pytest.approx(row["train/reward"])
        assert history[row["step"]]["train/loss"] == pytest.approx(row["train/loss"])
    [run_record] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    config = {i.key: json.loads(i.value_json) for i in run_record.config.update}
    value = {k: v.get("value", v) if isinstance(v, dict) else v for k, v in config.items()}
    assert value["env"]["id"] == "argym/Math-v0" and value["steps"] == 2, config
    assert (run / "tensorboard").is_dir() and (run / "wandb_id").read_text().strip() in path.name
