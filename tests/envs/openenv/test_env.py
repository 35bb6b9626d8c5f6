"""`argym/OpenEnv-v0` against an env served by openenv-core itself (guess_server.py, in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from openenv.core import GenericEnvClient

import argym
from argym.errors import ConfigError, InfrastructureError

GUESS_SERVER = Path(__file__).parent / "guess_server.py"
PROMPT = "I picked a number from 1 to 20"


def bisect(history: list[dict]) -> str:
    """A guesser that reads the server's "higher"/"lower" replies (what the agent sees)."""
    low, high = 1, 20
    for asked, told in zip(history[1::2], history[2::2]):
        if not asked["content"].isdigit():
            continue
        guess = int(asked["content"])
        if told["content"] == "higher":
            low = guess + 1
        elif told["content"] == "lower":
            high = guess - 1
    return str((low + high) // 2)


def test_an_episode_reads_the_servers_text_and_rewards(openenv_server):
    env = argym.make("argym/OpenEnv-v0", url=openenv_server)
    assert (env.unwrapped.action_field, env.unwrapped.observation_field) == ("guess", "prompt")
    obs, info = env.reset(seed=3)
    assert obs == [{"role": "user", "content": PROMPT + ". Guess it: reply with one number."}]
    obs, reward, terminated, truncated, info = env.step("a guess of twelve")
    assert obs[-1] == {"role": "user", "content": "That is not a number. Reply with one number."}
    assert info["reward_parts"] == {"outcome": -0.1} and reward == -0.1 and not (terminated or truncated)
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(bisect(obs))
    assert terminated and info["success"] and info["reward_parts"] == {"outcome": 1.0}
    assert obs[-1]["content"].startswith("Right, it was") and info["verdict"]["done"] is True
    assert not info["infra_failure"]
    env.close()


def test_the_same_actions_score_the_same_as_through_openenvs_own_client(openenv_server):
    env = argym.make("argym/OpenEnv-v0", url=openenv_server, max_turns=20)
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        remote_seed = env.unwrapped.task.meta["seed"]
        with GenericEnvClient(base_url=openenv_server).sync() as client:
            theirs = [client.reset(seed=remote_seed)]
            assert obs[0]["content"] == theirs[0].observation["prompt"]
            done = False
            while not done:
                guess = bisect(obs)
                obs, reward, terminated, truncated, info = env.step(guess)
                theirs.append(client.step({"guess": guess}))
                assert (obs[-1]["content"], reward, terminated) == (
                    theirs[-1].observation["prompt"],
                    theirs[-1].reward,
                    theirs[-1].done,
                )
                done = terminated or truncated
    env.close()


def test_eval_runs_on_an_openenv_server(openenv_server, tmp_path):
    out = tmp_path / "result.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "argym.cli",
            "eval",
            "argym/OpenEnv-v0",
            f"url={openenv_server}",
            "max_turns=2",
            "--agent",
            "random",
            "--episodes",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["n"] == 3 and result["infra_failures"] == 0
    for episode in result["episodes"]:  # success is the server's full reward on the last turn
        assert episode["task_id"].startswith("openenv#") and episode["success"] == (episode["reward"] >= 1.0)


def test_grpo_trains_on_an_openenv_server(openenv_server, tmp_path, fit_two_steps):
    from argym.algorithms.config import load_config

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        f"env:\n  id: argym/OpenEnv-v0\n  kwargs:\n    url: {openenv_server}\n    max_turns: 2\n"
        f"    test_size: 4\nout_dir: {tmp_path / 'run'}\n"
    )
    cfg = load_config(
        recipe,
        [
            "policy.tiny.hidden_size=32",
            "policy.tiny.num_layers=1",
            "policy.tiny.intermediate_size=64",
            "policy.tiny.num_heads=2",
            "warm_start.steps=0",
            "rollout.tasks_per_step=2",
            "rollout.group_size=2",
            "rollout.max_new_tokens=8",
            "eval.episodes=2",
            "eval.every=0",
            "algorithm.micro_batch_size=4",
            "steps=2",
            "checkpoint_every=2",
        ],
    )
    _, seen, _ = fit_two_steps(cfg, PROMPT)
    for t in seen:  # each turn's reward is the server's, as the outcome part
        assert t.task_id.startswith("openenv#") and t.infos
        assert [info["reward_parts"]["outcome"] for info in t.infos] == t.turn_rewards


def test_a_lost_server_is_an_infrastructure_failure_not_the_agents(serve_on_loopback):
    proc, url = serve_on_loopback(lambda port: [sys.executable, str(GUESS_SERVER), str(port)])
    env = argym.make("argym/OpenEnv-v0", url=url, timeout_s=10)
    env.reset(seed=0)
    proc.terminate()
    proc.wait(timeout=30)
    _, reward, terminated, _, info = env.step("5")
    assert info["infra_failure"] and terminated and reward == 0.0 and not info["success"]
    assert url in info["verdict"]["error"]
    with pytest.raises(InfrastructureError, match="did not reset"):
        env.reset(seed=1)
    env.close()
    with pytest.raises(InfrastructureError, match="is the server running"):
        argym.make("argym/OpenEnv-v0", url=url)


def test_bad_arguments_say_what_to_pass(openenv_server):
    for make in (argym.make, gym.make):  # gym.make calls the constructor as it is
        with pytest.raises(ConfigError, match="needs the kwarg url"):
            make("argym/OpenEnv-v0")
    with pytest.raises(ConfigError, match="not a field of the server's action"):
        argym.make("argym/OpenEnv-v0", url=openenv_server, action_field="text")
    with pytest.raises(ConfigError, match="OpenEnv server's address"):
        argym.make("argym/OpenEnv-v0", url="localhost:8000")
