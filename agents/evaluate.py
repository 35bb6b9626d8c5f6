"""Evaluation: run an agent on an env's split in order and score it.

DESIGN.md, "Evaluation": walk the chosen split (default ``test``) in order, so
two runs see the same tasks; ``episodes=N`` takes the first N tasks (all of
them if N is larger); ``samples_per_task=k`` draws k samples per task and
reports pass@1..pass@k with the unbiased estimator (arXiv 2107.03374);
``split="all"`` evaluates every task. The score is the success rate in
[0, 1] (``info["success"]``, whatever the reward shaping); the mean shaped
reward is reported beside it. The interval is 95%, clustered by task when a
task has several samples (`argym.stats.success_interval`).

Infrastructure failures (harness faults, never the candidate's) are excluded
from the score and counted in `EvalResult.infra_failures`.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import argym
from argym.errors import ConfigError, InfrastructureError
from argym.stats import pass_at_k, success_interval
from argym.types import Task, Trajectory
from argym.agents.policy import SamplingParams

CONFIDENCE = 0.95


@dataclass
class EvalResult:
    """One evaluation: the score, its interval, its provenance and every episode.

    `n` counts the scored episodes (infrastructure failures excluded; they are
    counted in `infra_failures`). `mean` is the success rate over those
    episodes, in [0, 1]; `ci_low`/`ci_high` its 95% interval. `pass_at_k` maps
    ``"pass@1"`` .. ``"pass@k"`` to the unbiased estimate averaged over tasks
    (only when `samples_per_task` > 1). `episodes` holds one dict per episode:
    ``{task_id, sample, success, reward, turns, tokens, infra_failure}``.
    """

    env_id: str
    env_kwargs: dict[str, Any]
    split: str
    n: int
    n_tasks: int
    samples_per_task: int
    mean: float
    ci_low: float
    ci_high: float
    mean_reward: float
    infra_failures: int
    seed: int
    agent: str
    sampling: dict[str, Any]
    pass_at_k: dict[str, float] = field(default_factory=dict)
    confidence: float = CONFIDENCE
    task_hash: str = ""
    """sha256 of the evaluated tasks (ids, prompts, answers) in order: same hash, same task set."""
    argym_version: str = argym.__version__
    episodes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the success rate is under ``"mean"``, the episode count under ``"n"``)."""
        return json.loads(json.dumps(asdict(self), default=str))


def evaluate(env_id: str, env_kwargs: dict[str, Any] | None = None, agent: Any = "oracle", *,
             agent_spec: str = "", split: str | None = None, episodes: int | None = None,
             samples_per_task: int = 1, seed: int = 0, sampling: SamplingParams | None = None,
             max_total_tokens: int = 2048) -> EvalResult:
    """Run `agent` on the tasks of `split` of `env_id` in order and score it.

    `agent` is an agent object (`TokenPolicy` or `MessageAgent`) or a spec
    string for `argym.agents.spec.load_agent` ("oracle", "random",
    "tiny:RUN_DIR", "hf:PATH"); a spec is loaded only after the env and its
    tasks are known to be valid. `agent_spec` names the agent in the result
    (defaults to the spec string).

    `split` defaults to ``env_kwargs["split"]`` if given, else ``"test"``;
    ``"all"`` is every task. `episodes=N` takes the first N tasks of the split
    (all if N is larger); a procedural train split is endless, so there it is
    required. `samples_per_task=k` draws k samples per task (k episodes each).

    `sampling` defaults to greedy (temperature 0) with one sample per task and
    to temperature 1.0 with k > 1 samples: greedy decoding would make the k
    samples identical, so pass@k would equal pass@1.
    """
    env_kwargs = dict(env_kwargs or {})
    split = str(split if split is not None else env_kwargs.get("split", "test"))
    if samples_per_task < 1:
        raise ConfigError(f"samples_per_task must be at least 1, got {samples_per_task}.")
    if episodes is not None and episodes < 1:
        raise ConfigError(f"episodes must be at least 1, got {episodes}.")
    if sampling is None:
        sampling = SamplingParams(temperature=0.0 if samples_per_task == 1 else 1.0)
    elif samples_per_task > 1 and sampling.temperature == 0.0:
        warnings.warn(f"samples_per_task={samples_per_task} with greedy sampling (temperature 0): a token "
                      "policy gives identical samples, so pass@k equals pass@1. Use a temperature > 0.",
                      stacklevel=2)

    tasks = eval_tasks(env_id, env_kwargs, split, episodes)

    if isinstance(agent, str):
        from argym.agents.spec import load_agent

        agent_spec = agent_spec or agent
        agent = load_agent(agent, seed=seed)
    agent_spec = agent_spec or getattr(agent, "name", type(agent).__name__)

    from argym.agents.rollout import RolloutEngine

    engine = RolloutEngine(env_id, env_kwargs, agent, sampling, max_total_tokens=max_total_tokens)
    try:
        trajectories = engine.run(tasks, group_size=samples_per_task, seed=seed)
    finally:
        engine.close()
    return score(trajectories, env_id=env_id, env_kwargs=env_kwargs, split=split, tasks=tasks,
                 samples_per_task=samples_per_task, seed=seed, agent=agent_spec, sampling=sampling.to_dict())


def eval_tasks(env_id: str, env_kwargs: dict[str, Any], split: str, episodes: int | None) -> list[Task]:
    """The tasks an evaluation walks: the first `episodes` tasks of `split`, in the source's order."""
    from argym.envs.base import TextEnv
    from argym.envs.tasks import ProceduralSource, check_split

    check_split(split)
    env = argym.make(env_id, **env_kwargs)
    try:
        inner = env.unwrapped
        if not isinstance(inner, TextEnv):
            raise ConfigError(f"{env_id!r} is not an argym text env ({type(inner).__name__}); "
                              f"`argym envs` lists the ones argym can evaluate.")
        source = inner.tasks
    finally:
        env.close()
    if episodes is None and split != "test" and isinstance(source, ProceduralSource):
        raise ConfigError(f"The {split!r} split of {env_id!r} is procedurally generated and endless; "
                          f"say how many tasks to evaluate with episodes=N (--episodes N).")
    tasks = source.take(split, episodes)
    if not tasks:
        raise ConfigError(f"{env_id!r} has no tasks in split {split!r}; try split='all' or another task set.")
    return tasks


def score(trajectories: list[Trajectory], *, env_id: str, env_kwargs: dict[str, Any], split: str,
          tasks: list[Task], samples_per_task: int, seed: int, agent: str,
          sampling: dict[str, Any]) -> EvalResult:
    """Turn the rollout engine's trajectories (grouped by task, in order) into an `EvalResult`."""
    if len(trajectories) != len(tasks) * samples_per_task:
        raise InfrastructureError(f"The rollout engine returned {len(trajectories)} trajectories for "
                                  f"{len(tasks)} tasks x {samples_per_task} samples.")
    episodes: list[dict[str, Any]] = []
    per_task: dict[str, list[bool]] = {}
    for i, traj in enumerate(trajectories):
        task = tasks[i // samples_per_task]
        if traj.task_id != task.id:
            raise InfrastructureError(f"Trajectory {i} is for task {traj.task_id!r}, expected {task.id!r}: "
                                      f"the rollout engine must return trajectories grouped by task, in order.")
        episodes.append({"task_id": traj.task_id, "sample": i % samples_per_task, "success": bool(traj.success),
                         "reward": float(traj.reward), "turns": int(traj.turns),
                         "tokens": int(traj.num_policy_tokens), "infra_failure": bool(traj.infra_failure)})
        if not traj.infra_failure:
            per_task.setdefault(traj.task_id, []).append(bool(traj.success))

    scored = [e for e in episodes if not e["infra_failure"]]
    infra = len(episodes) - len(scored)
    if not scored:
        raise InfrastructureError(f"All {len(episodes)} episodes of {env_id!r} were infrastructure failures "
                                  f"(harness faults, not the agent's); nothing to score.")
    mean, low, high = success_interval([e["success"] for e in scored], [e["task_id"] for e in scored],
                                       CONFIDENCE)
    pass_k: dict[str, float] = {}
    if samples_per_task > 1:
        for k in range(1, samples_per_task + 1):
            # tasks that lost samples to infrastructure failures count where they still have k
            vals = [pass_at_k(len(s), sum(s), k) for s in per_task.values() if len(s) >= k]
            if vals:
                pass_k[f"pass@{k}"] = sum(vals) / len(vals)
    return EvalResult(
        env_id=env_id, env_kwargs=dict(env_kwargs), split=split, n=len(scored), n_tasks=len(tasks),
        samples_per_task=samples_per_task, mean=mean, ci_low=low, ci_high=high,
        mean_reward=sum(e["reward"] for e in scored) / len(scored), infra_failures=infra, seed=seed,
        agent=agent, sampling=dict(sampling), pass_at_k=pass_k, task_hash=task_set_hash(tasks),
        episodes=episodes)


def task_set_hash(tasks: list[Task]) -> str:
    """A short, stable hash of the tasks in order (ids, prompts, answers, tests)."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(json.dumps([t.id, list(t.prompt), t.answer, t.tests], sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]
