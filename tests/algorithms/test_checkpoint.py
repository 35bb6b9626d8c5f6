"""Checkpoints that survive a kill: atomic replacement, and nothing left over from a killed save."""

from __future__ import annotations

from pathlib import Path

import torch

from argym.algorithms.checkpoint import find_checkpoint, load_state, save_checkpoint


class _Policy:
    """What `save_checkpoint` needs of a policy: `save(path, state_dict)` writing a Hugging Face checkpoint."""

    def save(self, path: Path, state_dict: dict | None = None) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "config.json").write_text("{}")


def test_a_save_killed_halfway_leaves_nothing_behind_the_next_save(tmp_path):
    killed = tmp_path / "checkpoint.tmp-4242"  # a process killed while it wrote its checkpoint
    (killed / "policy").mkdir(parents=True)
    (killed / "policy" / "model.safetensors").write_bytes(b"\0" * 1024)
    save_checkpoint(tmp_path, _Policy(), {"step": 3, "w": torch.zeros(2)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    ckpt = find_checkpoint(tmp_path)
    assert ckpt == tmp_path / "checkpoint" and load_state(ckpt)["step"] == 3
    save_checkpoint(tmp_path, _Policy(), {"step": 4})  # replaces it, nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    assert load_state(find_checkpoint(tmp_path))["step"] == 4
