"""Evaluation: run an agent on an env's split in order and score it.

docs/design.md, "Evaluation": walk the chosen split (default ``test``) in order, so
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

import functools
import hashlib
import json
import subprocess
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import argym
from argym.agents.policy import SamplingParams
from argym.errors import ConfigError, InfrastructureError
from argym.stats import pass_at_k, success_interval
from argym.transcript import transcript
from argym.types import Task, Trajectory

CONFIDENCE = 0.95


@dataclass
class EvalResult:
    """One evaluation: the score, its interval, its provenance and every episode.

    `n` counts the scored episodes (infrastructure failures excluded; they are
    counted in `infra_failures`). `mean` is the success rate over those
    episodes, in [0, 1]; `ci_low`/`ci_high` its 95% interval. `pass_at_k` maps
    ``"pass@1"`` .. ``"pass@k"`` to the unbiased estimate averaged over tasks
    (only when `samples_per_task` > 1). `episodes` holds one dict per episode:
    ``{task_id, sample, success, reward, turns, tokens, infra_failure, transcript}``; the transcript
    (what the model wrote, the env's replies, the verdict) is bounded (`argym.transcript`).
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
    # provenance for leaderboards (docs/design.md, Leaderboards); only the agent side knows these
    grader_versions: dict[str, str] = field(default_factory=dict)
    """The env's `grader_versions()`, e.g. ``{"math-verify": "0.8.0"}``."""
    split_hash: str = ""
    """`task_set_hash` of the whole split (all its tasks, not just the evaluated prefix); "" if it is endless."""
    env_defaults: dict[str, Any] = field(default_factory=dict)
    """The env's defaults for the constructor arguments not in `env_kwargs` (plain values only)."""
    agent_info: dict[str, Any] = field(default_factory=dict)
    """``{kind, model, fingerprint, parameters}``: the agent's kind, model path or name, a weights fingerprint."""
    training_run: dict[str, Any] = field(default_factory=dict)
    """The run the agent came from, if any: ``{dir, config_hash[, step]}``."""
    git_commit: str = ""
    """The argym source tree's git commit, when argym runs from a checkout."""
    wall_s: float | None = None
    """Seconds the evaluation took."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the success rate is under ``"mean"``, the episode count under ``"n"``)."""
        plain: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str))
        return plain


def evaluate(
    env_id: str,
    env_kwargs: dict[str, Any] | None = None,
    agent: Any = "oracle",
    *,
    agent_spec: str = "",
    split: str | None = None,
    episodes: int | None = None,
    samples_per_task: int = 1,
    seed: int = 0,
    sampling: SamplingParams | None = None,
    max_total_tokens: int = 2048,
) -> EvalResult:
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
        warnings.warn(
            f"samples_per_task={samples_per_task} with greedy sampling (temperature 0): a token "
            "policy gives identical samples, so pass@k equals pass@1. Use a temperature > 0.",
            stacklevel=2,
        )

    t0 = time.perf_counter()
    tasks, grader_versions, split_hash, env_defaults = _eval_setup(env_id, env_kwargs, split, episodes)

    if isinstance(agent, str):
        from argym.agents.spec import load_agent

        agent_spec = agent_spec or agent
        agent = load_agent(agent, seed=seed)
    agent_spec = agent_spec or getattr(agent, "name", type(agent).__name__)

    from argym.agents.program import ProgramAgent
    from argym.agents.rollout import RolloutEngine

    if isinstance(agent, ProgramAgent):  # an agent program drives its own episodes
        trajectories = agent.run(
            env_id, env_kwargs, tasks, samples_per_task, seed, sampling, max_total_tokens
        )
    else:
        engine = RolloutEngine(env_id, env_kwargs, agent, sampling, max_total_tokens=max_total_tokens)
        try:
            trajectories = engine.run(tasks, group_size=samples_per_task, seed=seed)
        finally:
            engine.close()
    result = score(
        trajectories,
        env_id=env_id,
        env_kwargs=env_kwargs,
        split=split,
        tasks=tasks,
        samples_per_task=samples_per_task,
        seed=seed,
        agent=agent_spec,
        sampling=sampling.to_dict(),
    )
    result.grader_versions, result.split_hash, result.env_defaults = grader_versions, split_hash, env_defaults
    result.agent_info = agent_provenance(agent, agent_spec)
    result.training_run = training_run(agent_spec)
    result.git_commit = git_commit()
    result.wall_s = round(time.perf_counter() - t0, 3)
    return result


def eval_tasks(env_id: str, env_kwargs: dict[str, Any], split: str, episodes: int | None) -> list[Task]:
    """The tasks an evaluation walks: the first `episodes` tasks of `split`, in the source's order."""
    return _eval_setup(env_id, env_kwargs, split, episodes)[0]


def _eval_setup(
    env_id: str, env_kwargs: dict[str, Any], split: str, episodes: int | None
) -> tuple[list[Task], dict[str, str], str, dict[str, Any]]:
    """`eval_tasks`, the env's grader versions, the whole split's hash and the env's defaults."""
    from argym.envs.base import TextEnv
    from argym.envs.tasks import ProceduralSource, check_split

    check_split(split)
    env = argym.make(env_id, **env_kwargs)
    try:
        inner = env.unwrapped
        if not isinstance(inner, TextEnv):
            raise ConfigError(
                f"{env_id!r} is not an argym text env ({type(inner).__name__}); "
                f"`argym envs` lists the ones argym can evaluate."
            )
        source = inner.tasks
        grader_versions = {str(k): str(v) for k, v in inner.grader_versions().items()}
        env_defaults = _env_defaults(type(inner), env_kwargs)
    finally:
        env.close()
    if episodes is None and split != "test" and isinstance(source, ProceduralSource):
        raise ConfigError(
            f"The {split!r} split of {env_id!r} is procedurally generated and endless; "
            f"say how many tasks to evaluate with episodes=N (--episodes N)."
        )
    tasks = source.take(split, episodes)
    if not tasks:
        raise ConfigError(f"{env_id!r} has no tasks in split {split!r}; try split='all' or another task set.")
    endless = split != "test" and isinstance(source, ProceduralSource)
    split_hash = "" if endless else task_set_hash(source.take(split, None))
    return tasks, grader_versions, split_hash, env_defaults


def _env_defaults(cls: type[object], given: dict[str, Any]) -> dict[str, Any]:
    """The plain-valued constructor defaults of an env class that `given` does not set."""
    import inspect

    skip = {"self", "split", "render_mode", "executors", *given}
    out: dict[str, Any] = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if (
            name not in skip
            and p.default is not inspect.Parameter.empty
            and isinstance(p.default, (str, int, float, bool, type(None)))
        ):
            out[name] = p.default
    return out


def score(
    trajectories: list[Trajectory],
    *,
    env_id: str,
    env_kwargs: dict[str, Any],
    split: str,
    tasks: list[Task],
    samples_per_task: int,
    seed: int,
    agent: str,
    sampling: dict[str, Any],
) -> EvalResult:
    """Turn the rollout engine's trajectories (grouped by task, in order) into an `EvalResult`."""
    if len(trajectories) != len(tasks) * samples_per_task:
        raise InfrastructureError(
            f"The rollout engine returned {len(trajectories)} trajectories for "
            f"{len(tasks)} tasks x {samples_per_task} samples."
        )
    episodes: list[dict[str, Any]] = []
    per_task: dict[str, list[bool]] = {}
    for i, traj in enumerate(trajectories):
        task = tasks[i // samples_per_task]
        if traj.task_id != task.id:
            raise InfrastructureError(
                f"Trajectory {i} is for task {traj.task_id!r}, expected {task.id!r}: "
                f"the rollout engine must return trajectories grouped by task, in order."
            )
        episodes.append(
            {
                "task_id": traj.task_id,
                "sample": i % samples_per_task,
                "success": bool(traj.success),
                "reward": float(traj.reward),
                "turns": int(traj.turns),
                "tokens": int(traj.num_policy_tokens),
                "infra_failure": bool(traj.infra_failure),
                "transcript": transcript(traj),
            }
        )
        if not traj.infra_failure:
            per_task.setdefault(traj.task_id, []).append(bool(traj.success))

    scored = [e for e in episodes if not e["infra_failure"]]
    infra = len(episodes) - len(scored)
    if not scored:
        raise InfrastructureError(
            f"All {len(episodes)} episodes of {env_id!r} were infrastructure failures "
            f"(harness faults, not the agent's); nothing to score."
        )
    mean, low, high = success_interval(
        [e["success"] for e in scored], [e["task_id"] for e in scored], CONFIDENCE
    )
    pass_k: dict[str, float] = {}
    if samples_per_task > 1:
        for k in range(1, samples_per_task + 1):
            # tasks that lost samples to infrastructure failures count where they still have k
            vals = [pass_at_k(len(s), sum(s), k) for s in per_task.values() if len(s) >= k]
            if vals:
                pass_k[f"pass@{k}"] = sum(vals) / len(vals)
    return EvalResult(
        env_id=env_id,
        env_kwargs=dict(env_kwargs),
        split=split,
        n=len(scored),
        n_tasks=len(tasks),
        samples_per_task=samples_per_task,
        mean=mean,
        ci_low=low,
        ci_high=high,
        mean_reward=sum(e["reward"] for e in scored) / len(scored),
        infra_failures=infra,
        seed=seed,
        agent=agent,
        sampling=dict(sampling),
        pass_at_k=pass_k,
        task_hash=task_set_hash(tasks),
        episodes=episodes,
    )


def task_set_hash(tasks: list[Task]) -> str:
    """A short, stable hash of the tasks in order (ids, prompts, answers, tests)."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(json.dumps([t.id, list(t.prompt), t.answer, t.tests], sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def weights_fingerprint(model: Any, per_tensor: int = 1024) -> str:
    """A cheap fingerprint of a torch model's weights: sha256 over each parameter's name,
    shape, dtype and an evenly strided sample of at most `per_tensor` values.

    Not a full hash (a 7B model would take minutes), but any training step moves
    nearly every weight, so two checkpoints of one run differ.
    """
    import torch

    h = hashlib.sha256()
    with torch.no_grad():
        for name, p in _state_tensors(model):
            flat = p.detach().reshape(-1)  # (numel,)
            sample = flat[:: max(1, flat.numel() // per_tensor)][:per_tensor]
            h.update(f"{name}|{tuple(p.shape)}|{p.dtype}|".encode())
            h.update(sample.to(device="cpu", dtype=torch.float64).numpy().tobytes())
    return h.hexdigest()[:16]


def _state_tensors(model: Any) -> list[tuple[str, Any]]:
    """`model.state_dict()`'s names and tensors. An FSDP model's state dict would reshard it and hold its
    shards (reading them is a collective), so its whole weights, kept gathered between updates
    (algorithms/fsdp.py), are read module by module in the state dict's order instead."""
    from torch import nn
    from torch.distributed.fsdp import FSDPModule

    module: nn.Module = model
    if not isinstance(model, FSDPModule):
        return list(module.state_dict().items())
    out: list[tuple[str, Any]] = []
    for prefix, sub in module.named_modules(remove_duplicate=False):
        dot = prefix + "." if prefix else ""
        out += [(dot + n, p) for n, p in sub._parameters.items() if p is not None]
        skip = sub._non_persistent_buffers_set
        out += [(dot + n, b) for n, b in sub._buffers.items() if b is not None and n not in skip]
    return out


def agent_provenance(agent: Any, spec: str) -> dict[str, Any]:
    """``{kind, model, fingerprint, parameters}`` of an agent (fingerprint only for torch policies)."""
    kind, _, arg = spec.partition(":")
    info: dict[str, Any] = {
        "kind": kind or type(agent).__name__,
        "model": arg or getattr(agent, "name", "") or kind,
    }
    model = getattr(agent, "model", None)
    if model is not None and hasattr(model, "state_dict") and hasattr(model, "parameters"):
        info["fingerprint"] = weights_fingerprint(model)
        info["parameters"] = int(sum(p.numel() for p in model.parameters()))
    return info


def training_run(spec: str) -> dict[str, Any]:
    """The run directory a ``tiny:``/``hf:``/``vllm:`` spec (or a program's inner one) points into, with its
    config hash, if it has one."""
    if spec.startswith("program:") and "@" in spec:
        spec = spec.partition("@")[2]
    kind, _, arg = spec.partition(":")
    arg = arg.partition("?")[0] if kind == "vllm" else arg
    if kind not in ("tiny", "hf", "vllm") or not arg:
        return {}
    path = Path(arg)
    for candidate in (path, path.parent, path.parent.parent):
        config = candidate / "config.yaml"
        if config.is_file():
            return {
                "dir": str(candidate),
                "config_hash": hashlib.sha256(config.read_bytes()).hexdigest()[:16],
            }
    return {}


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The commit of the argym checkout this code runs from ("" when installed from a wheel)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""
