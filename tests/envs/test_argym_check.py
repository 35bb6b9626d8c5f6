"""Every registered argym env passes `argym check` in full (small kwargs: few turns), on the process sandbox;
argym/OpenEnv-v0 against the tests' OpenEnv server (tests/envs/conftest.py)."""

from __future__ import annotations

import pytest

from argym.check import CheckConfig, run_checks
from argym.registration import own_ids

KWARGS = {
    "argym/Math-v0": {"max_attempts": 2},
    "argym/Code-v0": {"max_attempts": 2},
    "argym/DecomposeReasoner-v0": {},
    "argym/SWE-v0": {"max_turns": 2, "command_timeout_s": 20},
    "argym/ToolCall-v0": {"max_turns": 3},
    "argym/Support-v0": {"max_turns": 6},
    "argym/OpenEnv-v0": {},
    "argym/Verifiers-v0": {},
}
# CI checks one env of each kind of episode (single-turn text, tools, a repo in a sandbox); `make test-full` all
IN_CI = ("argym/Math-v0", "argym/ToolCall-v0", "argym/SWE-v0")


def test_every_registered_env_has_check_kwargs() -> None:
    assert sorted(KWARGS) == sorted(own_ids())
    assert set(IN_CI) <= set(KWARGS), "a renamed env would leave CI checking fewer envs than it says"


@pytest.mark.slow
@pytest.mark.parametrize(
    "env_id",
    [
        env_id if env_id in IN_CI else pytest.param(env_id, marks=pytest.mark.full(reason=f"CI: {IN_CI}"))
        for env_id in sorted(KWARGS)
    ],
)
def test_argym_env_passes_argym_check(env_id: str, request) -> None:
    kwargs = dict(KWARGS[env_id])
    if env_id == "argym/OpenEnv-v0":
        kwargs["url"] = request.getfixturevalue("openenv_server")
    report = run_checks(CheckConfig(env_id, kwargs, step_timeout_s=60, reset_timeout_s=60))
    assert report.failed() == [], report.to_dict()
