"""AgentPRM: Monte-Carlo Q targets on a tiny deterministic env whose true Q is known, and PRM training."""

from __future__ import annotations

import random

import pytest

from argym.agents.tiny import build_tiny_tokenizer
from argym.algorithms.agent_prm import AgentPRMConfig, agent_prm_round, branch_q_targets, play_out
from argym.envs.base import Reply, TextEnv
from argym.envs.tasks import ListSource
from argym.rewards.prm import build_classifier
from argym.rewards.prm_data import mc_q_targets, step_keys
from argym.types import Task, Trajectory


class TwoChoices(TextEnv):
    """Two turns, each "L" or "R"; the task succeeds iff both are "R". Deterministic, so Q is known."""

    def __init__(self, n_tasks: int = 40):
        self.n_tasks = n_tasks
        super().__init__(tasks=None, max_turns=2)

    def load_tasks(self, tasks):
        return ListSource(
            [
                Task(id=f"c{i}", prompt=({"role": "user", "content": f"Task {i}: say L or R."},))
                for i in range(self.n_tasks)
            ]
        )

    def respond(self, action):
        said = [m["content"] for m in self._messages if m["role"] == "assistant"]
        if len(said) == 1:
            return Reply(messages=[{"role": "user", "content": "Again."}], reward_parts={"outcome": 0.0})
        ok = said == ["R", "R"]
        return Reply(
            reward_parts={"outcome": float(ok)}, terminated=True, success=ok, verdict={"correct": ok}
        )


def actor(rng: random.Random, second_always_r: bool):
    def act(conversations):
        return ["R" if second_always_r and len(c) > 1 else rng.choice("LR") for c in conversations]

    return act


def episodes(n_tasks: int, samples: int, act) -> list[Trajectory]:
    out = []
    for i in range(n_tasks):
        for _ in range(samples):
            env = TwoChoices(n_tasks)
            obs, _ = env.reset(options={"task_id": f"c{i}"})
            ((ok, turns),) = play_out([env], [obs], act)
            assert turns == 2
            msgs = env.snapshot().messages
            out.append(
                Trajectory(
                    task_id=f"c{i}",
                    messages=msgs,
                    reward=float(ok),
                    success=ok,
                    turns=2,
                    terminated=True,
                    truncated=False,
                )
            )
    return out


def true_q(key: str, second_always_r: bool) -> float:
    said = [line.split(": ", 1)[1] for line in key.split("\n") if line.startswith("assistant: ")]
    if said[0] == "L":
        return 0.0
    if len(said) == 2:
        return float(said[1] == "R")
    return 1.0 if second_always_r else 0.5


def test_mc_targets_average_every_rollout_through_a_state_action():
    trajs = episodes(n_tasks=3, samples=30, act=actor(random.Random(0), second_always_r=True))
    table = mc_q_targets(trajs)
    assert len(table) >= 6  # both first actions and their continuations on each task
    for key in table.sums:
        assert table.target(key) == true_q(key, True), key
    # counts: every rollout passes through its first step's key
    firsts = {step_keys(t)[0] for t in trajs}
    assert sum(table.counts[k] for k in firsts) == len(trajs)
    # γ < 1: the paper's mapping, z = ±1 discounted by the steps to the end, then (1 + γ^k·z)/2
    discounted = mc_q_targets(trajs, gamma=0.5)
    win = next(k for k in firsts if table.target(k) == 1.0)
    lose = next(k for k in firsts if table.target(k) == 0.0)
    assert discounted.target(win) == 0.75 and discounted.target(lose) == 0.25  # one step before the end
    last = next(k for k in table.sums if k not in firsts and table.target(k) == 1.0)
    assert discounted.target(last) == 1.0  # the final step is not discounted


def test_branching_from_a_snapshot_estimates_the_true_q():
    rng = random.Random(1)
    seed_traj = [t for t in episodes(1, 20, actor(rng, False)) if t.messages[1]["content"] == "R"][:1]
    seed_traj += [t for t in episodes(1, 20, actor(rng, False)) if t.messages[1]["content"] == "L"][:1]
    table = branch_q_targets(lambda: TwoChoices(1), seed_traj, actor(rng, False), branches=200)
    (r_key,) = [k for k in table.sums if k.endswith("assistant: R")]
    (l_key,) = [k for k in table.sums if k.endswith("assistant: L")]
    assert table.counts[r_key] == 200 and table.counts[l_key] == 200
    assert table.target(r_key) == pytest.approx(0.5, abs=0.12)  # true Q(s0, R) = 0.5 under the random policy
    assert table.target(l_key) == 0.0
    # with a deterministic continuation the branched estimate is exact
    exact = branch_q_targets(lambda: TwoChoices(1), seed_traj[:1], actor(rng, True), branches=5)
    assert list(exact.sums.values()) == [5.0]


def test_branch_targets_are_discounted_like_rollout_targets():
    """A branch ending one turn after the action adds (1 + γ·z)/2, as `mc_q_targets` does for a rollout."""
    rng = random.Random(3)
    trajs = episodes(1, 20, actor(rng, False))
    seeds = [next(t for t in trajs if t.messages[1]["content"] == a) for a in "RL"]
    table = branch_q_targets(lambda: TwoChoices(1), seeds, actor(rng, True), branches=3, gamma=0.5)
    (r_key,) = [k for k in table.sums if k.endswith("assistant: R")]
    (l_key,) = [k for k in table.sums if k.endswith("assistant: L")]
    assert table.target(r_key) == 0.75 and table.target(l_key) == 0.25  # success / failure one turn later
    rollouts = mc_q_targets([t for t in trajs if t.messages[1]["content"] == "L"], gamma=0.5)
    assert rollouts.target(l_key) == table.target(l_key)  # the two kinds of target agree


def test_prm_training_beats_the_constant_predictor_on_held_out_tasks():
    rng = random.Random(2)
    trajs = episodes(n_tasks=40, samples=6, act=actor(rng, False))
    prm = build_classifier(
        build_tiny_tokenizer(), hidden_size=32, num_layers=1, num_heads=2, max_positions=128
    )
    report = agent_prm_round(
        prm,
        trajs,
        AgentPRMConfig(branches=2, test_fraction=0.25, epochs=4, lr=3e-3, batch_size=16),
        make_env=lambda: TwoChoices(40),
        act=actor(rng, False),
    )
    assert report["prm/train_examples"] > 50
    assert report["prm/heldout_bce"] < report["prm/heldout_bce_constant"] - 0.05, report
    assert report["prm/heldout_auc"] > 0.75, report
