"""AgentPRM (Choudhury 2025, arXiv 2502.10325): the loop that needs rollouts.

Each iteration: (1) roll out the current policy; (2) estimate Monte-Carlo Q
targets for every (state, action) — the average outcome of all rollouts
through it (`argym.rewards.prm_data.mc_q_targets`) plus, where the env can
`snapshot()`/`restore()`, `branches` extra rollouts continued from the state
right after the action, all branches played in one batch; (3) train the PRM
(a small transformer with a scalar head, BCE against the soft target,
`argym.rewards.prm`); (4) use it — as step rewards in RL (`reward.prm:
hf:PATH`, min-form by default) or as a best-of-N action selector
(`argym.agents.prm_best_of_n.PRMBestOfN`). Quality is reported on held-out
trajectories (tasks the PRM never saw): BCE against the constant predictor
and the AUC of predicting final success from each prefix.

Simplification: branching is per assistant turn (an env holds whole turns),
so single-turn answers split into segments get targets from averaging only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from argym.agents.policy import SamplingParams
from argym.agents.renderer import ChatRenderer
from argym.rewards.prm import ClassifierPRM, bce, roc_auc, train_classifier
from argym.rewards.prm_data import QTable, discounted_target, mc_q_targets, prefix_labels, step_keys
from argym.rewards.steps import assistant_turns
from argym.seeding import seed_for
from argym.types import Message, Trajectory

Actor = Callable[[list[list[Message]]], list[Any]]
"""Next assistant turn for each conversation in a batch (a policy, or a scripted agent in tests)."""


def policy_actor(policy: Any, sampling: SamplingParams, seed: int = 0) -> Actor:
    """An `Actor` from a token policy: each conversation is rendered with its chat template, then sampled.

    Branches only estimate values, so re-rendering earlier turns from text is harmless here.
    """
    renderer = ChatRenderer(policy.tokenizer)
    calls = [0]

    def act(conversations: list[list[Message]]) -> list[Any]:
        calls[0] += 1
        ids = [renderer.prompt_ids(c) for c in conversations]
        return [
            c.text for c in policy.generate(ids, sampling, seed=seed_for(seed, calls[0], purpose="branch"))
        ]

    return act


def play_out(envs: Sequence[Any], observations: list[list[Message]], act: Actor) -> list[tuple[bool, int]]:
    """Continue every (restored) episode with `act` until it ends, batching the actor.

    Returns (success, turns played) per env; the turns discount a branch's outcome.
    """
    success = [False] * len(envs)
    turns = [0] * len(envs)
    live = list(range(len(envs)))
    obs = list(observations)
    while live:
        actions = act([obs[i] for i in live])
        still = []
        for i, a in zip(live, actions):
            o, _, terminated, truncated, info = envs[i].step(a)
            obs[i] = o
            turns[i] += 1
            if terminated or truncated:
                success[i] = bool(info.get("success", False))
            else:
                still.append(i)
        live = still
    return list(zip(success, turns))


def branch_q_targets(
    make_env: Callable[[], Any],
    trajectories: Sequence[Trajectory],
    act: Actor,
    branches: int = 4,
    table: QTable | None = None,
    gamma: float = 1.0,
) -> QTable:
    """Add `branches` rollouts from the state after each non-final turn of each multi-turn trajectory.

    The state is rebuilt by replaying the trajectory's actions in an env and
    snapshotting it; each branch restores the snapshot into its own env (so
    branches are independent) and is played out with `act`. A branch that ends
    k turns after the action adds (1 + γ^k·z)/2, the same target as a rollout
    (`argym.rewards.prm_data.discounted_target`), so both kinds average together.
    """
    table = table if table is not None else QTable()
    if branches < 1:
        return table
    envs: list[Any] = []
    starts: list[list[Message]] = []
    keys: list[str] = []
    base = make_env()
    try:
        for t in trajectories:
            turns = assistant_turns(t.messages)
            if t.infra_failure or len(turns) < 2:
                continue
            base.reset(options={"task_id": t.task_id})
            for k, key in enumerate(step_keys(t)[:-1]):
                base.step(dict(t.messages[turns[k]]))  # the assistant message as it was played
                snap = base.get_wrapper_attr("snapshot")()
                for _ in range(branches):
                    env = make_env()
                    env.get_wrapper_attr("restore")(snap)
                    envs.append(env)
                    starts.append(snap.messages)
                    keys.append(key)
        for key, (ok, played) in zip(keys, play_out(envs, starts, act)):
            table.add(key, discounted_target(ok, played, gamma))
    finally:
        base.close()
        for env in envs:
            env.close()
    return table


@dataclass
class AgentPRMConfig:
    """One AgentPRM round: targets, PRM training and its held-out report."""

    branches: int = 4
    """Extra rollouts from the state after each non-final turn (0: averaging only)."""
    gamma: float = 1.0
    """Discount of the ±1 outcome by steps to the end, target (1 + γ^k·z)/2 (the paper's 0.95); 1: success rate."""
    test_fraction: float = 0.15
    """Share of tasks held out for the PRM report (the paper's 85/15 split)."""
    epochs: int = 3
    """Passes over the targets (the paper: 1 epoch of many more examples)."""
    lr: float = 1e-3
    """AdamW learning rate of the small PRM (the paper's 5e-5 is for a 3B model)."""
    batch_size: int = 32
    """Examples per PRM step."""
    seed: int = 0
    """Seeds the PRM's shuffling."""


def held_out(task_id: str, fraction: float) -> bool:
    """A stable split of tasks: hash of the id, so the same task is held out in every round."""
    return int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 16**8 < fraction


def agent_prm_round(
    prm: ClassifierPRM,
    trajectories: Sequence[Trajectory],
    config: AgentPRMConfig,
    make_env: Callable[[], Any] | None = None,
    act: Actor | None = None,
) -> dict[str, float]:
    """Stages (2)–(3) on this iteration's rollouts; returns the PRM's held-out report.

    Train and held-out trajectories are split by task. Branching needs
    `make_env` and `act`. Report: `prm/train_examples`, `prm/train_loss`
    (last epoch), `prm/heldout_bce` against `prm/heldout_bce_constant` (the
    train targets' mean predicted everywhere), `prm/heldout_auc`.
    """
    train = [t for t in trajectories if not held_out(t.task_id, config.test_fraction)]
    test = [t for t in trajectories if held_out(t.task_id, config.test_fraction)]
    table = mc_q_targets(train, config.gamma)
    if make_env is not None and act is not None:
        branch_q_targets(make_env, train, act, config.branches, table, config.gamma)
    texts, targets = table.examples()
    losses = train_classifier(
        prm,
        texts,
        targets,
        epochs=config.epochs,
        lr=config.lr,
        batch_size=config.batch_size,
        seed=config.seed,
    )
    per_epoch = max(1, len(losses) // max(config.epochs, 1))
    report = {"prm/train_examples": float(len(texts)), "prm/train_loss": sum(losses[-per_epoch:]) / per_epoch}
    if test:
        test_texts, test_targets = mc_q_targets(test, config.gamma).examples()
        probs = prm.probabilities(test_texts)
        mean = sum(targets) / len(targets)
        report["prm/heldout_bce"] = bce(probs, test_targets)
        report["prm/heldout_bce_constant"] = bce([mean] * len(test_targets), test_targets)
        prefix_texts, labels = prefix_labels(test)
        report["prm/heldout_auc"] = roc_auc(prm.probabilities(prefix_texts), labels)
    return report


def run_agent_prm(
    prm: ClassifierPRM,
    rollout: Callable[[int], list[Trajectory]],
    config: AgentPRMConfig,
    iterations: int = 1,
    make_env: Callable[[], Any] | None = None,
    actor: Callable[[int], Actor] | None = None,
    improve: Callable[[ClassifierPRM, int], None] | None = None,
) -> list[dict[str, float]]:
    """The AgentPRM iteration: roll out (`rollout(i)`), fit the PRM, then `improve(prm, i)` the policy.

    `actor(i)` gives the branching actor of iteration i (the current policy);
    `improve` is where RL against the PRM happens (e.g. a `Trainer` with
    ``reward.prm: hf:PATH``). Returns one report per iteration.
    """
    reports = []
    for i in range(iterations):
        trajs = rollout(i)
        report = agent_prm_round(prm, trajs, config, make_env, actor(i) if actor is not None else None)
        report["prm/iteration"] = float(i)
        reports.append(report)
        if improve is not None:
            improve(prm, i)
    return reports
