"""What the learner is given to train on, recorded: shared by the tests that check each update's batch."""

from __future__ import annotations

from typing import Any


def record_updates(trainer: Any) -> list[list[Any]]:
    """Wrap `trainer.learner.update` so that each call's trajectories are appended to the list returned;
    the update itself runs as before."""
    batches: list[list[Any]] = []
    real = trainer.learner.update

    def update(trajs, pad_id, *args, **kwargs):
        batches.append(list(trajs))
        return real(trajs, pad_id, *args, **kwargs)

    trainer.learner.update = update
    return batches
