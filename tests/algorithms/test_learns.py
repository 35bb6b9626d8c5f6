"""End to end on the CPU: the quickstart's warm start, then its RL, and a held-out gain that could not
come from noise alone, synchronous and asynchronous. One module, so that the warm start (minutes) is
trained once per run, also when pytest-xdist spreads modules over workers (a module runs on one)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

# The quickstart's end-to-end bar: half its RL steps, 200 held-out tasks before and after (on this machine
# 0.267 -> 0.55 at step 50), and a gain of at least 15 points.
E2E_OVERRIDES = ["steps=50", "eval.episodes=200", "eval.every=0"]
E2E_MIN_GAIN = 0.15


@pytest.fixture(scope="module")
def quickstart_warm_policy(tmp_path_factory) -> Path:
    """The quickstart's supervised warm start, trained once for every test here."""
    from argym.algorithms.config import load_config
    from argym.algorithms.trainer import Trainer

    out = tmp_path_factory.mktemp("quickstart-warm")
    Trainer(load_config(None, ["steps=0", f"out_dir={out}"])).close()
    return out / "checkpoint" / "policy"


@pytest.fixture
def quickstart_learns(quickstart_warm_policy) -> Callable[..., dict]:
    """``quickstart_learns(run_dir, extra=[])``: the quickstart's RL (with `extra` overrides) from the shared
    warm start; asserts the end-to-end bar and returns the run's summary."""
    from argym.algorithms.quickstart import run_quickstart

    def learn(run_dir: Path, extra: Sequence[str] = ()) -> dict:
        warm = ["policy.kind=hf", f"policy.path={quickstart_warm_policy}", "warm_start.steps=0"]
        summary = run_quickstart(str(run_dir), [*E2E_OVERRIDES, *warm, *extra])
        assert summary["before"]["n"] >= 200
        # 95% Wilson intervals on the same tasks; demand a clear gain
        assert summary["after"]["accuracy"] >= summary["before"]["accuracy"] + E2E_MIN_GAIN, summary
        return summary

    return learn


@pytest.mark.slow
def test_grpo_raises_held_out_accuracy(tmp_path, quickstart_learns):
    """Synchronous GRPO, the quickstart as shipped; its plot and summary are written."""
    summary = quickstart_learns(tmp_path / "run")
    assert (tmp_path / "run" / "learning_curve.png").stat().st_size > 10_000
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["before"]["accuracy"] == summary["before"]["accuracy"]


@pytest.mark.slow
@pytest.mark.full(
    reason="CI: the synchronous run above, and test_async.py (staleness 0 equals sync, the lag bound, a fixed "
    "lag reproduces exactly); async learning over seeds: benchmarks/async.py"
)
def test_async_staleness_2_still_learns_the_quickstart(tmp_path, quickstart_learns):
    """The same bar with batches running 2 versions ahead of the learner (rollout.mode=async).

    At a fixed lag (rollout.partial=false): every token trained after step 2 is exactly 2 versions old, the
    most the bound allows, and the run is reproducible, so its gain is one figure, not a draw. With partial
    rollouts the samples depend on thread timing; their learning is measured over seeds by
    benchmarks/async.py, not by one run against a bar."""
    quickstart_learns(
        tmp_path / "run",
        ["rollout.mode=async", "rollout.max_staleness=2", "rollout.partial=false", "algorithm.tis_cap=2.0"],
    )
