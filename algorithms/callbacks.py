"""Trainer callbacks: your code, called when a step ends, after an evaluation and after a checkpoint.

A callback is any callable ``callback(state)``; `state` is the run's one `RunState`, updated before each
call, whose `event` says what just happened. A callback reads the run there (the step, its metrics,
the evaluation, the `Trainer` itself) and may end the run cleanly by setting ``state.stop = True``: the
trainer finishes the step, writes a checkpoint and `fit` returns (a run with the same `out_dir` resumes
from there). What a callback raises ends the run like any error.

Two ways in, the same callables:
- from a recipe, ``callbacks: [my_hooks:log_reward]`` (or ``callbacks=[my_hooks:log_reward]`` on the
  command line): each a ``module:function`` (or ``path/to/file.py:function``), loaded as agent programs
  and reward functions are (`argym.callables.load_function`);
- from Python, ``Trainer(cfg, callbacks=[...])`` with functions or objects.

For TRL users, `TrainerCallback` dispatches to ``on_step_end``, ``on_evaluate`` and ``on_checkpoint``
methods (transformers' `TrainerCallback` names them ``on_step_end``, ``on_evaluate``, ``on_save``).
Callbacks run in every process of a multi-process run (evaluations: in the main one); the run stops
when any process asks it to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from argym.callables import load_function

Callback = Callable[["RunState"], Any]


@dataclass
class RunState:
    """What a callback sees, and the one thing it may change (`stop`)."""

    trainer: Any
    """The `Trainer`: its config (`cfg`), `policy`, `learner`, `run_dir`, for whatever else a callback needs."""
    event: str = ""
    """What just happened: "step_end", "evaluate" or "checkpoint"."""
    step: int = 0
    """RL steps done."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The latest step's metrics, as logged to metrics.jsonl."""
    evaluation: Any = None
    """The latest evaluation's `EvalResult` (at "evaluate": the one just done); None before the first."""
    stop: bool = False
    """Set it to end the run after the current step: a checkpoint is written and `fit` returns."""


class TrainerCallback:
    """A callback object in TRL's shape: override any of `on_step_end`, `on_evaluate`, `on_checkpoint`."""

    def __call__(self, state: RunState) -> None:
        getattr(self, f"on_{state.event}")(state)

    def on_step_end(self, state: RunState) -> None:
        """After each RL step, once its metrics are logged."""

    def on_evaluate(self, state: RunState) -> None:
        """After each evaluation (`state.evaluation`)."""

    def on_checkpoint(self, state: RunState) -> None:
        """After each checkpoint is written (`state.trainer.run_dir / "checkpoint"`)."""


class Callbacks:
    """A run's callbacks (a recipe's `callbacks` names, then those given in Python) and their `RunState`."""

    def __init__(self, trainer: Any, names: Iterable[str] | str = (), given: Iterable[Callback] = ()):
        if isinstance(names, str):  # from the command line: callbacks=m:f or callbacks=[m:f, m:g]
            names = [n.strip() for n in names.strip("[]").split(",") if n.strip()]
        self.items: list[Callback] = [*(load_function(n, "callbacks") for n in names), *given]
        self.state = RunState(trainer)

    def __call__(self, event: str, **changes: Any) -> RunState:
        """Update the state (`step` from the trainer, then `changes`) and call every callback with it."""
        state = self.state
        state.event, state.step = event, state.trainer.step
        for name, value in changes.items():
            setattr(state, name, value)
        for callback in self.items:
            callback(state)
        return state
