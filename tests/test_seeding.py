"""`seed_for`: one seed per (step, draw, purpose), the same in every process."""

import itertools
import subprocess
import sys

import pytest

from argym.errors import ConfigError
from argym.seeding import PURPOSES, seed_for


def test_distinct_step_draw_purpose_give_distinct_seeds():
    for seed in (0, 1, 12345):
        keys = list(itertools.product(range(0, 7_919, 97), range(0, 126, 5), PURPOSES))
        seeds = {seed_for(seed, step, draw, purpose) for step, draw, purpose in keys}
        assert len(seeds) == len(keys)
    # the edges of the documented range
    edges = list(itertools.product((0, 7_918), (0, 125), PURPOSES))
    assert len({seed_for(1_098_999, s, d, p) for s, d, p in edges}) == len(edges)


def test_rollout_seeds_are_the_ones_recorded_runs_used():
    # the trainer's rollout seed before seed_for existed: seed * 1_000_003 + step + 7_919 * draw
    assert seed_for(0, 5, 0) == 5
    assert seed_for(3, 17, 2, "rollout") == 3 * 1_000_003 + 17 + 7_919 * 2


def test_same_seeds_in_another_process():
    code = "from argym.seeding import PURPOSES, seed_for; print([seed_for(7, 3, 1, p) for p in PURPOSES])"
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": h},
        ).stdout
        for h in ("1", "2")
    }
    assert runs == {str([seed_for(7, 3, 1, p) for p in PURPOSES]) + "\n"}


def test_unknown_purpose_is_a_clear_error():
    with pytest.raises(ConfigError, match="rollout"):
        seed_for(0, 0, 0, "rollouts")
