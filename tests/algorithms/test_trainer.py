"""The training loop: config loading, warm start data, resume after a kill (learning end to end: test_learns.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from argym.agents.renderer import ChatRenderer, conversation_ids
from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.config import TrainConfig, load_config
from argym.algorithms.trainer import Trainer
from argym.errors import ConfigError

from ..tiny_run import TINY_RUN

REPO = Path(__file__).resolve().parents[2]

SMALL = [
    *TINY_RUN,
    "rollout.tasks_per_step=3",
    "rollout.group_size=4",
    "rollout.max_new_tokens=6",
    "eval.episodes=10",
    "algorithm.micro_batch_size=5",
    "algorithm.num_minibatches=2",
    "checkpoint_every=2",
]


def test_recipe_matches_the_defaults():
    """configs/grpo_math.yaml is the quickstart written out: one to one with TrainConfig, in its own run dir."""
    recipe = load_config(REPO / "configs" / "grpo_math.yaml")
    assert recipe.out_dir == "runs/grpo_math" != TrainConfig().out_dir
    assert dataclasses.asdict(recipe) == dataclasses.asdict(TrainConfig(out_dir="runs/grpo_math"))


def test_overrides_and_errors(tmp_path):
    cfg = load_config(
        None, ["algorithm.lr=5e-4", "steps=7", "env.kwargs.max_attempts=2", "policy.tiny.num_layers=2"]
    )
    assert cfg.algorithm.lr == 5e-4 and cfg.steps == 7 and cfg.policy.tiny.num_layers == 2
    assert cfg.env.kwargs["max_attempts"] == 2 and "tasks" in cfg.env.kwargs
    with pytest.raises(ConfigError, match="Did you mean: steps"):
        load_config(None, ["stesp=3"])
    with pytest.raises(ConfigError, match="temperature"):
        load_config(None, ["rollout.temperature=0.5"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("rollout:\n  group_sise: 4\n")
    with pytest.raises(ConfigError, match="rollout.group_sise"):
        load_config(bad)


def test_conversation_ids_mask_only_assistant_turns():
    tok = build_tiny_tokenizer()
    r = ChatRenderer(tok)
    msgs = [
        {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "a2"},
    ]
    ids, mask = conversation_ids(r, msgs)
    text = tok.decode(ids)
    assert text == tok.apply_chat_template(msgs, tokenize=False).rstrip("\n")
    policy = tok.decode([i for i, m in zip(ids, mask) if m])
    assert policy == "a1<|im_end|>a2<|im_end|>"


def _fit(cfg, crash_after=None):
    trainer = Trainer(cfg)
    if crash_after is not None:
        real = trainer.train_step
        calls = {"n": 0}

        def crashing():
            calls["n"] += 1
            if calls["n"] > crash_after:
                raise KeyboardInterrupt("simulated kill")
            return real()

        trainer.train_step = crashing
    try:
        trainer.fit()
    finally:
        trainer.close()
    return trainer


def _params(run_dir):
    from argym.agents.hf import HFPolicy

    return {
        k: v.clone()
        for k, v in HFPolicy.load(Path(run_dir) / "checkpoint" / "policy").model.state_dict().items()
    }


@pytest.mark.parametrize(
    "extra",
    [
        [],
        [
            "algorithm.kl_coef=0.05"
        ],  # the KL reference must be the one RL started from, not the resumed policy
        [
            "policy.lora_r=4",
            "algorithm.kl_coef=0.05",
        ],  # LoRA: base rebuilt, adapters reloaded, reference = adapters off
    ],
    ids=["full", "kl", "lora-kl"],
)
def test_resume_after_kill_equals_uninterrupted_run(tmp_path, extra):
    # An entropy bonus gives every step a gradient even when no sample is rewarded, so a resume
    # that reloaded anything differently (weights, tokenizer, optimizer, RNG, reference) would show.
    cfg = SMALL + ["steps=4", "algorithm.entropy_coef=0.01"] + extra
    straight = load_config(None, cfg + [f"out_dir={tmp_path / 'a'}"])
    _fit(straight)
    killed = load_config(None, cfg + [f"out_dir={tmp_path / 'b'}"])
    with pytest.raises(KeyboardInterrupt):
        _fit(killed, crash_after=3)  # checkpoint at step 2, killed during step 4
    state = torch.load(tmp_path / "b" / "checkpoint" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 2
    at_step_2 = _params(tmp_path / "b")
    resumed = _fit(killed)
    assert resumed.step == 4
    a, b = _params(tmp_path / "a"), _params(tmp_path / "b")
    assert a.keys() == b.keys()
    assert any(not torch.equal(at_step_2[k], b[k]) for k in b), "steps 3-4 did not change the model"
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)

    def rows(d):
        return [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]

    ra, rb = rows(tmp_path / "a"), rows(tmp_path / "b")
    assert [r["step"] for r in rb] == [1, 2, 3, 4]
    for x, y in zip(ra, rb):
        for key in ("train/reward", "train/loss", "train/entropy", "train/response_tokens"):
            assert x[key] == y[key], (key, x["step"])


def test_lora_checkpoint_is_an_ordinary_merged_model(tmp_path):
    """With LoRA only the adapters train; the checkpoint's policy/ loads without peft and computes the same logits."""
    from argym.agents.hf import ADAPTER_DIR, HFPolicy

    cfg = load_config(
        None,
        SMALL
        + [
            "steps=1",
            "policy.lora_r=4",
            "policy.lora_dropout=0.0",
            "policy.lora_target_modules=[q_proj, v_proj]",
            f"out_dir={tmp_path}",
        ],
    )
    trainer = _fit(cfg)
    model = trainer.policy.model
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert (tmp_path / "checkpoint" / "policy" / ADAPTER_DIR / "adapter_config.json").is_file()
    merged = HFPolicy.load(tmp_path / "checkpoint" / "policy").model
    assert not hasattr(merged, "peft_config")
    ids = torch.tensor([[1, 5, 9, 12, 7]])
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(
            merged(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-5, rtol=1e-4
        )
        with model.disable_adapter():  # the adapters did learn something
            assert not torch.allclose(model(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-6)


def test_run_dir_refuses_another_config(tmp_path):
    cfg = load_config(None, SMALL + ["steps=0", f"out_dir={tmp_path}"])
    Trainer(cfg).close()
    with pytest.raises(ConfigError, match="another config.*out_dir=runs/NAME"):
        Trainer(load_config(None, SMALL + ["steps=0", "seed=3", f"out_dir={tmp_path}"]))
    Trainer(load_config(None, SMALL + ["steps=1", f"out_dir={tmp_path}"])).close()  # more steps: a resume
    # a run written by an older argym lacks newer keys: they count as their defaults, not as a change
    import yaml

    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    del saved["policy"]["lora_r"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    Trainer(load_config(None, SMALL + ["steps=1", f"out_dir={tmp_path}"])).close()


@pytest.mark.parametrize(
    "algo",
    ["dapo", "vapo"]
    + [pytest.param(a, marks=pytest.mark.slow) for a in ("drgrpo", "gspo", "rloo", "reinforce++", "grpo")],
)
def test_every_preset_trains_one_step(tmp_path, algo, reward_where):
    """`argym train configs/<preset>.yaml` runs: one small step per preset (VAPO with its critic)."""
    cfg = load_config(
        None,
        SMALL
        + [
            f"algo={algo}",
            "steps=1",
            "eval.every=0",
            f"out_dir={tmp_path}",
            "algorithm.value_pretrain_steps=1",
            "sampling.max_draws=50",
        ],
    )
    trainer = Trainer(cfg)
    if algo == "dapo":
        # mark the first sample of each even group correct, so 2 of 3 groups per draw are informative
        reward_where(trainer, lambda i, t, group_size: t.group % 2 == 0 and i % group_size == 0)
    try:
        m = trainer.train_step()
    finally:
        trainer.close()
    assert np.isfinite(m["train/loss"])
    if algo == "vapo":
        assert "value/loss" in m and np.isfinite(m["value/explained_var"])
        assert trainer.learner.critic is not None
    if algo == "dapo":  # dynamic sampling kept only groups with unequal outcomes: 2 + 1 of 2 draws
        assert m["sampling/draws"] == 2 and m["sampling/informative_frac"] == pytest.approx(4 / 6)
        assert m["train/group_reward_std"] > 0


def test_vapo_killed_during_value_pretraining_resumes_it(tmp_path, monkeypatch):
    """A kill during VAPO's value pretraining: the resumed run finishes the pretraining and ends with the
    critic and policy of an uninterrupted run (it used to skip the rest and train on an under-fit critic)."""
    from argym.algorithms.value import Critic

    # the 2-step warm start solves nothing: DAPO's overlong penalty gives the critic non-zero returns to fit
    cfg = SMALL + [
        "algo=vapo",
        "algorithm.value_pretrain_steps=3",
        "rollout.tasks_per_step=2",
        "steps=1",
        "eval.every=0",
        "sampling.overlong=true",
    ]
    straight = _fit(load_config(None, cfg + [f"out_dir={tmp_path / 'a'}"]))
    real, calls = Critic.update, {"n": 0}

    def crashing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt("simulated kill")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Critic, "update", crashing)
    with pytest.raises(KeyboardInterrupt):
        Trainer(
            load_config(None, cfg + [f"out_dir={tmp_path / 'b'}"])
        )  # checkpoint after 2 of 3 pretraining steps
    killed = torch.load(tmp_path / "b" / "checkpoint" / "trainer_state.pt", weights_only=False)
    monkeypatch.setattr(Critic, "update", real)
    resumed = _fit(load_config(None, cfg + [f"out_dir={tmp_path / 'b'}"]))
    assert resumed.step == straight.step == 1
    a, b = (
        torch.load(tmp_path / d / "checkpoint" / "trainer_state.pt", weights_only=False) for d in ("a", "b")
    )
    assert any(not torch.equal(killed["critic"][k], a["critic"][k]) for k in a["critic"]), (
        "pretraining did nothing"
    )
    for k in a["critic"]:
        torch.testing.assert_close(a["critic"][k], b["critic"][k], rtol=0, atol=0, msg=k)
    pa, pb = _params(tmp_path / "a"), _params(tmp_path / "b")
    for k in pa:
        torch.testing.assert_close(pa[k], pb[k], rtol=0, atol=0, msg=k)
    assert (killed["step"], killed.get("value_pretrained")) == (
        0,
        2,
    )  # the kill's checkpoint recorded its progress
    assert a["value_pretrained"] == b["value_pretrained"] == 3


@pytest.mark.parametrize(
    "overrides, spec",
    [
        ([], "tiny:RUN"),
        (["policy.kind=hf", "policy.path=ckpt"], "hf:RUN"),
        (["policy.kind=hf", "policy.path=ckpt", "rollout.backend=vllm"], "vllm:RUN"),
        (["rollout.strategy=program", "agent.program=my_agent:solve"], "program:my_agent:solve@tiny:RUN"),
    ],
)
def test_the_board_records_the_agent_spec_that_reloads_the_run(tmp_path, overrides, spec):
    """Evaluations during training name the real policy and backend (an HF or vLLM run is not `tiny:`),
    and the spec leads back to the run directory and its config."""
    from argym.agents.evaluate import training_run
    from argym.algorithms.build import run_agent_spec
    from argym.algorithms.config import load_config

    (tmp_path / "config.yaml").write_text("steps: 1\n")
    got = run_agent_spec(load_config(None, overrides), tmp_path)
    assert got == spec.replace("RUN", str(tmp_path))
    assert training_run(got)["dir"] == str(tmp_path)
