"""Trainer callbacks: a recipe's `module:function` and a Python object see every step, evaluation and checkpoint,
and a callback stops the run cleanly (a checkpoint at that step, from which the same out_dir resumes)."""

from __future__ import annotations

import torch

from argym.algorithms.callbacks import TrainerCallback
from argym.algorithms.config import load_config
from argym.algorithms.trainer import Trainer

from ..tiny_run import TINY_RUN

SMALL = [
    *TINY_RUN,
    "rollout.tasks_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=4",
    "eval.episodes=2",
    "eval.every=1",
    "checkpoint_every=100",  # only the stop and the last step write one
    "steps=4",
]

RECIPE_CALLBACK = """
SEEN = []


def record(state):
    SEEN.append((state.event, state.step))
"""


class StopAt(TrainerCallback):
    """Stops the run once `step` steps are done; keeps what it saw."""

    def __init__(self, step: int):
        self.step, self.seen = step, []

    def on_step_end(self, state):
        assert state.metrics["train/trajectories"] == 4.0  # the step's logged metrics
        self.seen.append(("step_end", state.step))
        state.stop = state.step == self.step

    def on_evaluate(self, state):
        self.seen.append(("evaluate", state.step, state.evaluation.n))

    def on_checkpoint(self, state):
        saved = torch.load(state.trainer.run_dir / "checkpoint" / "trainer_state.pt", weights_only=False)
        self.seen.append(("checkpoint", state.step, saved["step"]))


def test_a_callback_sees_each_step_and_stops_the_run_cleanly(tmp_path, monkeypatch):
    (tmp_path / "my_hooks.py").write_text(RECIPE_CALLBACK)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(None, [*SMALL, f"out_dir={tmp_path / 'run'}", "callbacks=[my_hooks:record]"])
    stop = StopAt(2)
    trainer = Trainer(cfg, callbacks=[stop])
    try:
        trainer.fit()
    finally:
        trainer.close()
    import my_hooks

    # steps 3 and 4 never ran: the stop at step 2 wrote its checkpoint and fit returned
    assert trainer.step == 2 and [r["step"] for r in trainer.metrics.records()] == [1, 2]
    assert stop.seen == [
        ("evaluate", 1, 2),
        ("step_end", 1),
        ("evaluate", 2, 2),
        ("step_end", 2),
        ("checkpoint", 2, 2),
    ]
    assert [(event, step) for event, step, *_ in stop.seen] == my_hooks.SEEN  # the recipe's sees the same

    resumed = Trainer(cfg, callbacks=[StopAt(0)])  # the same out_dir resumes from the stop
    try:
        assert resumed.step == 2
        resumed.fit()
    finally:
        resumed.close()
    assert resumed.step == 4
