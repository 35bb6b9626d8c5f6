"""Presets are config instances: selectable by `algo=`, by a recipe file and from Python."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from argym.algorithms.config import TrainConfig, load_config
from argym.algorithms.learner import LearnerConfig
from argym.algorithms.presets import DAPO, GSPO, PRESETS, SCALE_FIELDS, get_preset
from argym.errors import ConfigError

from ..tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]


def test_every_preset_is_a_learner_config_instance_with_a_paper():
    assert set(PRESETS) == {"grpo", "drgrpo", "dapo", "vapo", "gspo", "rloo", "reinforce++"}
    for p in map(PRESETS.get, PRESETS):
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
    assert (cfg.algorithm.clip_high, cfg.algorithm.loss_agg, cfg.algorithm.dual_clip) == (
        0.28,
        "token-mean",
        10.0,
    )
    assert cfg.sampling.dynamic and cfg.sampling.overlong
    for f in SCALE_FIELDS:  # lr 2e-4 of the tiny recipe, not DAPO's 1e-6
        assert getattr(cfg.algorithm, f) == getattr(base.algorithm, f), f
    assert DAPO.learner.lr == 1e-6 and DAPO.learner.num_minibatches == 16  # the paper's, from Python


def test_dapo_weight_decay_reaches_the_optimizer():
    """DAPO's AdamW weight decay 0.1 (verl's DAPO recipe; the paper states none) is the algorithm's, not the
    scale's: `algo=dapo` writes it over a recipe, and the learner's AdamW takes it."""
    from accelerate import Accelerator

    from argym.agents.tiny import TinyModelConfig, build_tiny_model, build_tiny_tokenizer
    from argym.algorithms.learner import Learner

    cfg = load_config(REPO / "configs" / "grpo_math.yaml", ["algo=dapo"])
    assert "weight_decay" not in SCALE_FIELDS
    assert cfg.algorithm.weight_decay == DAPO.learner.weight_decay == 0.1
    model = build_tiny_model(build_tiny_tokenizer(), TinyModelConfig(num_layers=1), seed=0)
    learner = Learner(model, cfg.algorithm, Accelerator(cpu=True))
    assert [g["weight_decay"] for g in learner.optimizer.param_groups] == [0.1]
    assert load_config(None, ["algo=dapo", "algorithm.weight_decay=0"]).algorithm.weight_decay == 0.0


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

    small = [
        *TINY_RUN,
        "rollout.tasks_per_step=2",
        "rollout.group_size=2",
        "rollout.max_new_tokens=4",
        "eval.episodes=4",
        "steps=1",
        f"out_dir={tmp_path}",
    ]
    cli = Path(sys.executable).parent / "argym"
    proc = subprocess.run(
        [str(cli), "train", str(REPO / "configs" / "gspo.yaml"), *small],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "summary.json").is_file()
    assert "algo: gspo" in (tmp_path / "config.yaml").read_text()


def test_presets_set_their_papers_optimizer_steps_and_a_recipe_can_override(tmp_path):
    """Mini-batches per rollout are part of the algorithm: with one, the ratio is 1 and no clip acts."""
    steps = {
        name: load_config(None, [f"algo={name}"]).algorithm.num_minibatches
        for name in ("grpo", "dapo", "vapo", "gspo")
    }
    assert steps == {"grpo": 1, "dapo": 16, "vapo": 16, "gspo": 4}
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("algo: dapo\nalgorithm:\n  num_minibatches: 4\n")
    assert load_config(recipe).algorithm.num_minibatches == 4  # the file's own value wins over its preset
    assert load_config(recipe, ["algorithm.num_minibatches=2"]).algorithm.num_minibatches == 2
    # a recipe written for another algorithm, re-based on DAPO from the command line: DAPO's 16
    assert load_config(REPO / "configs" / "grpo_math.yaml", ["algo=dapo"]).algorithm.num_minibatches == 16


def test_drgrpo_constant_follows_the_file_in_one_order(tmp_path):
    """`algo: drgrpo` inside a file: C is the file's max_new_tokens, as with `algo=drgrpo` on the command line."""
    recipe = tmp_path / "drgrpo.yaml"
    recipe.write_text("algo: drgrpo\nrollout:\n  max_new_tokens: 40\n")
    assert load_config(recipe).algorithm.loss_agg_constant == 40
    assert load_config(recipe, ["rollout.max_new_tokens=24"]).algorithm.loss_agg_constant == 24
    assert load_config(None, ["algo=drgrpo", "rollout.max_new_tokens=40"]).algorithm.loss_agg_constant == 40
    shipped = load_config(REPO / "configs" / "drgrpo.yaml", ["rollout.max_new_tokens=32"])
    assert shipped.algorithm.loss_agg_constant == 32
    pinned = tmp_path / "pinned.yaml"  # a value any source sets is kept
    pinned.write_text("algo: drgrpo\nrollout:\n  max_new_tokens: 40\nalgorithm:\n  loss_agg_constant: 100\n")
    assert load_config(pinned).algorithm.loss_agg_constant == 100
    assert load_config(recipe, ["algorithm.loss_agg_constant=7"]).algorithm.loss_agg_constant == 7


TINY = [
    "policy.tiny.hidden_size=32",
    "policy.tiny.num_layers=1",
    "policy.tiny.intermediate_size=64",
    "policy.tiny.num_heads=2",
    "warm_start.steps=2",
    "warm_start.tasks=16",
    "warm_start.batch_size=8",
    "rollout.tasks_per_step=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "eval.every=0",
]


@pytest.mark.parametrize("algo", ["dapo", "gspo"])
def test_preset_clipping_acts_at_its_own_mini_batch_count(tmp_path, algo, reward_where):
    """32 trajectories in the preset's own mini-batches (DAPO 16, GSPO 4): after the first step π_θ ≠ π_old,
    so clip-higher / GSPO's sequence clip act (clip fraction > 0; exactly 0 with one mini-batch)."""
    from argym.algorithms.trainer import Trainer

    # lr 2e-3 (a scale field the preset leaves to the recipe): the tiny policy moves within 16 steps
    trainer = Trainer(
        load_config(None, TINY + [f"algo={algo}", "algorithm.lr=2e-3", "steps=1", f"out_dir={tmp_path}"])
    )
    reward_where(trainer, lambda i, t, group_size: i % 2 == 0)  # reward one sample in two
    try:
        m = trainer.train_step()
    finally:
        trainer.close()
    assert m["train/optimizer_steps"] == {"dapo": 16, "gspo": 4}[algo]
    assert m["train/clip_frac"] > 0


@pytest.mark.slow
def test_argym_train_dapo_and_gspo_clip_through_the_cli(tmp_path):
    """`argym train algo=dapo|gspo` from the command line, on a policy warm-started far enough to solve
    some one-digit sums: the logged clip fraction is > 0 (with one mini-batch it would be exactly 0)."""
    import json
    import subprocess
    import sys

    cli = Path(sys.executable).parent / "argym"
    small = [
        "policy.tiny.hidden_size=64",
        "policy.tiny.num_layers=1",
        "policy.tiny.intermediate_size=128",
        "policy.tiny.num_heads=2",
        "env.kwargs.tasks=arithmetic(digits=1,ops=+,terms=2)",
        "rollout.tasks_per_step=16",
        "rollout.group_size=4",
        "eval.episodes=4",
        "eval.every=0",
        "sampling.max_draws=50",
    ]
    warm = tmp_path / "warm"
    proc = subprocess.run(
        [
            str(cli),
            "train",
            *small,
            "warm_start.steps=200",
            "warm_start.tasks=256",
            "warm_start.batch_size=16",
            "steps=0",
            f"out_dir={warm}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for algo in ("dapo", "gspo"):
        out = tmp_path / algo
        proc = subprocess.run(
            [
                str(cli),
                "train",
                f"algo={algo}",
                *small,
                "policy.kind=hf",
                f"policy.path={warm / 'checkpoint' / 'policy'}",
                "warm_start.steps=0",
                "steps=2",
                f"out_dir={out}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if "train/clip_frac" in r]
        assert train and max(r["train/clip_frac"] for r in train) > 0, (algo, train)
        assert train[0]["train/optimizer_steps"] == {"dapo": 16, "gspo": 4}[algo]
