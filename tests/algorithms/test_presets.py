"""Presets are config instances: selectable by `algo=`, by a recipe file and from Python."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from argym.algorithms.config import TrainConfig, load_config
from argym.algorithms.learner import LearnerConfig
from argym.algorithms.presets import DAPO, GSPO, PRESETS, SCALE_FIELDS, get_preset
from argym.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_every_preset_is_a_learner_config_instance_with_a_paper():
    assert set(PRESETS) == {"grpo", "drgrpo", "dapo", "vapo", "gspo", "rloo", "reinforce++"}
    for p in PRESETS.values():
        assert type(p.learner) is LearnerConfig  # an instance, not a subclass
        assert p.paper.count(".") == 1 and p.paper[:2].isdigit()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_recipe_file_equals_algo_override(name):
    fname = name.replace("++", "pp")
    from_file = load_config(REPO / "configs" / f"{fname}.yaml")
    from_override = load_config(None, [f"algo={name}", f"out_dir=runs/{fname}"])
    assert dataclasses.asdict(from_file) == dataclasses.asdict(from_override)
    assert from_file.algo == name


def test_preset_sets_the_algorithm_and_keeps_the_scale():
    cfg = load_config(REPO / "configs" / "grpo_math.yaml", ["algo=dapo"])
    base = TrainConfig()
    assert (cfg.algorithm.clip_high, cfg.algorithm.loss_agg, cfg.algorithm.dual_clip) == (0.28, "token-mean", 10.0)
    assert cfg.sampling.dynamic and cfg.sampling.overlong
    for f in SCALE_FIELDS:  # lr 2e-4 of the tiny recipe, not DAPO's 1e-6
        assert getattr(cfg.algorithm, f) == getattr(base.algorithm, f), f
    assert DAPO.learner.lr == 1e-6 and DAPO.learner.num_minibatches == 16  # the paper's, from Python


def test_other_overrides_win_over_the_preset_in_any_order():
    cfg = load_config(None, ["algorithm.clip_high=0.5", "algo=dapo"])
    assert cfg.algorithm.clip_high == 0.5 and cfg.algorithm.loss_agg == "token-mean"
    cfg = load_config(None, ["algo=gspo", "algorithm.clip_low=0.1"])
    assert cfg.algorithm.policy_loss == "gspo" and cfg.algorithm.clip_low == 0.1


def test_drgrpo_constant_is_the_max_generation_length():
    cfg = load_config(None, ["rollout.max_new_tokens=24", "algo=drgrpo"])
    assert cfg.algorithm.loss_agg == "seq-mean-token-sum-norm" and cfg.algorithm.loss_agg_constant == 24
    assert cfg.algorithm.advantage == "drgrpo"


def test_unknown_preset_names_close_matches():
    with pytest.raises(ConfigError, match="Did you mean: dapo"):
        load_config(None, ["algo=dapoo"])
    assert get_preset("DAPO") is DAPO and get_preset("dr_grpo").name == "drgrpo"
    assert get_preset("REINFORCEpp").name == "reinforce++"
    assert GSPO.learner.clip_low == 3e-4 and GSPO.learner.clip_high == 4e-4


@pytest.mark.slow
def test_argym_train_with_a_preset_recipe(tmp_path):
    """`argym train configs/gspo.yaml ...` from the command line, one small step."""
    import subprocess
    import sys

    small = ["policy.tiny.hidden_size=32", "policy.tiny.num_layers=1", "policy.tiny.intermediate_size=64",
             "policy.tiny.num_heads=2", "warm_start.steps=2", "warm_start.tasks=16", "warm_start.batch_size=8",
             "rollout.tasks_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=4", "eval.episodes=4",
             "steps=1", f"out_dir={tmp_path}"]
    cli = Path(sys.executable).parent / "argym"
    proc = subprocess.run([str(cli), "train", str(REPO / "configs" / "gspo.yaml"), *small],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "summary.json").is_file()
    assert "algo: gspo" in (tmp_path / "config.yaml").read_text()
