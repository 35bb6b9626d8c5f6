"""An argym env served (`argym serve`) and consumed back (`argym/OpenEnv-v0`) is the same env (issue 44, item 11):
the same conversation turn by turn (not the structured observation dumped as JSON) and the same grading, for an
agent that solves the task and one that does not."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

import argym

ENV_ID = "argym/Math-v0"
KWARGS = {"max_attempts": 2, "split": "test"}


def episode(env: Any, actions: Any, task: Any = None, seed: int | None = None) -> list[tuple]:
    """(messages, reward, terminated, truncated, success, reward_parts, infra_failure) after reset and each step;
    `actions(env)` gives the next action."""
    obs, _ = env.reset(seed=seed, options={"task": task} if task is not None else None)
    out: list[tuple] = [(obs,)]
    while True:
        obs, reward, terminated, truncated, info = env.step(actions(env))
        out.append(
            (obs, reward, terminated, truncated, info["success"], info["reward_parts"], info["infra_failure"])
        )
        if terminated or truncated:
            return out


def local_then_served(local: Any, remote: Any, seed: int, agent: str) -> tuple[list[tuple], list[tuple]]:
    """Seed `seed`'s episode on the local env with `agent`'s actions, then the same actions through the server
    (task ``openenv#N`` is the server's episode for seed N: the local env's episode for seed N)."""
    sent: list[str] = []

    def act(_env: Any) -> str:
        sent.append(local.unwrapped.oracle_action() if agent == "oracle" else "pass")
        return sent[-1]

    want = episode(local, act, seed=seed)
    replay = iter(sent)
    got = episode(remote, lambda _env: next(replay), task=remote.unwrapped.tasks.get(f"openenv#{seed}"))
    return want, got


@pytest.mark.parametrize("agent", ["oracle", "wrong"])
def test_served_and_consumed_is_the_local_env(serve, agent):
    local = argym.make(ENV_ID, **KWARGS)
    with serve(ENV_ID, env_kwargs=KWARGS) as (url, _):
        remote = argym.make("argym/OpenEnv-v0", url=url)
        try:
            for seed in (0, 1):
                want, got = local_then_served(local, remote, seed, agent)
                assert got == want, (seed, got, want)
                assert "infra_failure" not in got[0][0][0]["content"]  # a conversation, not a JSON dump
                assert got[-1][4] is (agent == "oracle") and len(got) == (2 if agent == "oracle" else 3)
        finally:
            remote.close()
            local.close()


def test_argym_eval_on_a_served_env_scores_as_locally(serve, tmp_path):
    """`argym eval argym/OpenEnv-v0 url=...` of a served argym env, from a scratch directory: the transcripts
    are the served env's conversations (a wrong agent's every attempt graded as the local env grades it)."""
    import json

    with serve(ENV_ID, env_kwargs=KWARGS) as (url, _):
        out = subprocess.run(
            [sys.executable, "-m", "argym.cli", "eval", "argym/OpenEnv-v0", f"url={url}", "--agent", "random"]
            + ["--episodes", "2", "--out", "r.json"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    local = argym.make(ENV_ID, **KWARGS)
    try:
        for e in result["episodes"]:
            messages = e["transcript"]["messages"]
            seed = int(e["task_id"].split("#")[1])
            obs, _ = local.reset(seed=seed)
            assert messages[0] == obs[0]  # the task's own prompt
            for turn in messages[1::2]:  # replay the agent's turns locally: the same replies
                obs, *_ = local.step(turn["content"])
            assert messages == obs and e["success"] is False
    finally:
        local.close()
