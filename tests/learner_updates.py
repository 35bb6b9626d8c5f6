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


def assert_lags_within(batches: list[list[Any]], records: list[dict[str, Any]], bound: int) -> None:
    """Each step's batch (`batches`, as `record_updates` keeps them; `records`: the steps' metrics) trains only
    tokens that record the version that sampled them, `bound` versions old at most, the logged lag max is the
    batch's, and some trained token is stale (batches ran ahead of the learner)."""
    lags: list[int] = []
    for step, trajs in enumerate(batches):
        assert trajs and all(len(t.policy_versions) == len(t.loss_mask) for t in trajs)
        versions = [v for t in trajs for v, m in zip(t.policy_versions, t.loss_mask) if m]
        assert versions and min(versions) >= 0, (step, "a trained token without its version")
        step_lags = [step - v for v in versions]
        assert min(step_lags) >= 0 and max(step_lags) <= bound, (step, step_lags)
        assert records[step]["train/version_lag_max"] == max(step_lags)
        lags += step_lags
    assert max(lags) >= 1, "batches ran ahead of the learner: some trained tokens are stale"
