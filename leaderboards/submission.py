"""A leaderboard submission: an evaluation result with its provenance, validated.

docs/design.md, "Leaderboards": two results are comparable only when they share the
board key — env id (its ``-vN`` suffix is the env version), env kwargs, the
task-set hash, split, grader versions, metric and samples per task: the same
tasks graded the same way. How the agent decoded (temperature, top-p, max new
tokens) is the agent's, not the board's: it is kept on the row, so a trained
run's own evaluation (``max_new_tokens`` of its rollouts) and ``argym eval`` of
the same checkpoint meet on one board. Beside
the key a submission carries the score and its interval, the mean shaped
reward, the sampling settings, the episode counts, the agent (spec, kind, model path, a cheap weights
fingerprint), the training run it came from, seed, argym version and git
commit, wall time and every episode (with its transcript, when the result has
one, cut again to the bounds of `argym.transcript` so a hand-made file
cannot bloat the board).

`validate` takes a plain dict (``EvalResult.to_dict()``) or anything with a
``to_dict()``. It checks types and ranges and *recomputes* the summary (score,
interval, mean reward, counts, pass@k) from the per-episode results with
`argym.stats`; a submission whose summary does not match its episodes is
refused. What is stored is the recomputed summary.

The task set is the hash of the *whole split* (``split_hash``), so evaluations
of the first 100 and the first 500 tasks of one split share a board (their
episode counts differ). When the split hash is known, the ``tasks=`` kwarg
leaves the key (the hash identifies the tasks by content, however the source
was spelled) and the env's defaults fill the kwargs not given, so
``max_attempts=1`` and no ``max_attempts`` are one board. Without a split hash
(an endless procedural split) the evaluated tasks' hash and the kwargs as
given are used.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from argym.errors import ArgymError, did_you_mean
from argym.stats import pass_at_k, success_interval
from argym.transcript import bound_transcript

TOLERANCE = 1e-6
"""How far a submitted summary figure may be from the one recomputed from its episodes."""

METRIC = "pass@1"
"""The ranked score: the success rate over scored episodes (pass@1; with k samples per task its mean)."""


class SubmissionError(ArgymError, ValueError):
    """A submission that cannot go on a board; the message says which field and why."""


@dataclass(frozen=True)
class BoardKey:
    """What makes two results comparable; `key` is a short hash of all of it."""

    env_id: str
    env_kwargs: dict[str, Any]
    split: str
    task_set: str
    grader_versions: dict[str, str]
    metric: str
    samples_per_task: int
    display_kwargs: dict[str, Any] = field(default_factory=dict, compare=False)
    """The kwargs as submitted (tasks included) with the env's defaults, for display only; not part of the key."""
    default_kwargs: dict[str, Any] = field(default_factory=dict, compare=False)
    """The env's defaults: the label leaves out a kwarg at its default (the page shows all on hover)."""

    def spec(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "env_kwargs": self.env_kwargs,
            "split": self.split,
            "task_set": self.task_set,
            "grader_versions": self.grader_versions,
            "metric": self.metric,
            "samples_per_task": self.samples_per_task,
        }

    @property
    def key(self) -> str:
        return board_key(self.spec())

    @property
    def env_version(self) -> int | None:
        m = re.search(r"-v(\d+)$", self.env_id)
        return int(m.group(1)) if m else None

    def label(self) -> str:
        """One line for a human: env, the kwargs not at their defaults, split, metric."""
        shown = self.display_kwargs or self.env_kwargs
        changed = {
            k: v for k, v in shown.items() if k not in self.default_kwargs or self.default_kwargs[k] != v
        }
        kw = " ".join(f"{k}={v}" for k, v in sorted(changed.items()))
        k = f" k={self.samples_per_task}" if self.samples_per_task > 1 else ""
        return f"{self.env_id} {kw}".strip() + f" | split={self.split} | {self.metric}{k}"


@dataclass
class Submission:
    """A validated submission, ready for the store (summary recomputed from `episodes`)."""

    key: BoardKey
    env_kwargs: dict[str, Any]
    task_hash: str
    sampling: dict[str, Any]
    """How the agent decoded (temperature, top_p, max_new_tokens): shown on its row, not part of the key."""
    agent: str
    agent_info: dict[str, Any]
    score: float
    ci_low: float
    ci_high: float
    confidence: float
    mean_reward: float
    n: int
    n_tasks: int
    infra_failures: int
    pass_at_k: dict[str, float]
    seed: int
    training_run: dict[str, Any]
    argym_version: str
    git_commit: str
    wall_s: float | None
    episodes: list[dict[str, Any]] = field(default_factory=list)

    def provenance(self) -> dict[str, Any]:
        """Everything but the episodes, as stored beside the row."""
        return {
            "board": self.key.spec(),
            "env_kwargs": self.env_kwargs,
            "task_hash": self.task_hash,
            "sampling": self.sampling,
            "agent": self.agent,
            "agent_info": self.agent_info,
            "score": self.score,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "mean_reward": self.mean_reward,
            "n": self.n,
            "n_tasks": self.n_tasks,
            "infra_failures": self.infra_failures,
            "pass_at_k": self.pass_at_k,
            "seed": self.seed,
            "training_run": self.training_run,
            "argym_version": self.argym_version,
            "git_commit": self.git_commit,
            "wall_s": self.wall_s,
        }

    @property
    def uid(self) -> str:
        """A content hash: submitting the same result twice stores it once."""
        return submission_uid(self.provenance(), self.episodes)


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def board_key(spec: dict[str, Any]) -> str:
    """The short hash that names a board (`BoardKey.spec`); the store re-keys old boards with it."""
    return hashlib.sha256(canonical(spec).encode()).hexdigest()[:12]


def submission_uid(provenance: dict[str, Any], episodes: list[dict[str, Any]]) -> str:
    """A submission's content hash (`Submission.uid`); the store recomputes it when it migrates a row."""
    return hashlib.sha256(canonical([provenance, episodes]).encode()).hexdigest()[:24]


# ---- field checks ----------------------------------------------------------------------

REQUIRED = (
    "env_id",
    "env_kwargs",
    "split",
    "task_hash",
    "grader_versions",
    "samples_per_task",
    "sampling",
    "n",
    "n_tasks",
    "mean",
    "ci_low",
    "ci_high",
    "mean_reward",
    "infra_failures",
    "seed",
    "agent",
    "argym_version",
    "episodes",
)
EPISODE_FIELDS = ("task_id", "success", "reward", "turns", "tokens")


def _int(d: dict[str, Any], name: str, where: str = "", minimum: int = 0) -> int:
    v = d.get(name)
    if isinstance(v, bool) or not isinstance(v, int):
        raise SubmissionError(f"{where}{name!r} must be an integer, got {v!r} ({type(v).__name__}).")
    if v < minimum:
        raise SubmissionError(f"{where}{name!r} must be at least {minimum}, got {v}.")
    return v


def _transcript(e: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The episode's transcript, if it has one, cut to the bounds of `argym.transcript`."""
    try:
        return bound_transcript(e.get("transcript"))
    except ValueError as err:
        raise SubmissionError(f"{where}'transcript': {err}.") from None


def _float(d: dict[str, Any], name: str, where: str = "", unit: bool = False) -> float:
    v = d.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SubmissionError(f"{where}{name!r} must be a number, got {v!r} ({type(v).__name__}).")
    v = float(v)
    if not math.isfinite(v):
        raise SubmissionError(f"{where}{name!r} must be a finite number, got {v}.")
    if unit and not 0.0 <= v <= 1.0:
        raise SubmissionError(f"{where}{name!r} must be in [0, 1] (a success rate), got {v}.")
    return v


def _str(d: dict[str, Any], name: str, where: str = "", empty: bool = False) -> str:
    v = d.get(name)
    if not isinstance(v, str) or (not empty and not v.strip()):
        raise SubmissionError(f"{where}{name!r} must be a non-empty string, got {v!r}.")
    return v


def _dict(d: dict[str, Any], name: str) -> dict[str, Any]:
    v = d.get(name)
    if not isinstance(v, dict):
        raise SubmissionError(f"{name!r} must be a mapping, got {v!r} ({type(v).__name__}).")
    try:
        return json.loads(canonical(v))
    except (TypeError, ValueError) as e:
        raise SubmissionError(
            f"{name!r} must hold plain JSON values (finite numbers, strings, lists, maps): {e}."
        ) from None


def _bool(d: dict[str, Any], name: str, where: str) -> bool:
    v = d.get(name, False)
    if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
        return bool(v)
    raise SubmissionError(f"{where}{name!r} must be true or false, got {v!r}.")


def check_env_id(env_id: str) -> None:
    """Refuse an env id that names no registered env; ``MODULE:ID`` (the form `argym eval` takes) imports
    MODULE first, as `argym.make` does."""
    import gymnasium as gym

    from argym.registration import resolve

    try:
        resolve(env_id)
    except ArgymError:
        hint = did_you_mean(env_id, list(gym.registry))
        raise SubmissionError(
            f"Unknown env {env_id!r}: it is not registered, so its results cannot be ranked."
            f"{hint} (`argym envs` lists the registered envs.)"
        ) from None


def _close(name: str, submitted: float, recomputed: float) -> None:
    if abs(submitted - recomputed) > TOLERANCE:
        raise SubmissionError(
            f"{name!r} is {submitted:.6g} but its episodes give {recomputed:.6g}: the summary "
            f"does not match the per-episode results. Submit the evaluation result unchanged."
        )


def validate(result: Any, *, check_env: bool = True) -> Submission:
    """Check a result and recompute its summary; raises `SubmissionError` with what is wrong."""
    if hasattr(result, "to_dict") and not isinstance(result, dict):
        result = result.to_dict()
    if not isinstance(result, dict):
        raise SubmissionError(
            f"A submission is an evaluation result (a dict or an object with .to_dict()), "
            f"got {type(result).__name__}."
        )
    missing = [f for f in REQUIRED if f not in result]
    if missing:
        raise SubmissionError(
            f"The submission lacks provenance field(s) {', '.join(missing)}; submit an "
            f"`argym eval` result (EvalResult.to_dict()) from this argym version."
        )
    env_id = _str(result, "env_id")
    if check_env:
        check_env_id(env_id)
    env_kwargs = _dict(result, "env_kwargs")
    split = _str(result, "split")
    env_kwargs.pop("split", None)  # the split is its own key field
    grader_versions = {str(k): str(v) for k, v in _dict(result, "grader_versions").items()}
    sampling = _dict(result, "sampling")
    k = _int(result, "samples_per_task", minimum=1)
    task_hash = _str(result, "task_hash")
    split_hash = result.get("split_hash") or ""
    if not isinstance(split_hash, str):
        raise SubmissionError(f"'split_hash' must be a string, got {split_hash!r}.")
    defaults = _dict(result, "env_defaults") if result.get("env_defaults") is not None else {}
    shown = {**defaults, **env_kwargs}
    shown.pop("split", None)
    key_kwargs = {n: v for n, v in shown.items() if n != "tasks"} if split_hash else env_kwargs
    key = BoardKey(
        env_id=env_id,
        env_kwargs=key_kwargs,
        split=split,
        task_set=split_hash or task_hash,
        grader_versions=grader_versions,
        metric=METRIC,
        samples_per_task=k,
        display_kwargs=shown,
        default_kwargs=defaults,
    )

    submitted = {
        name: _float(result, name, unit=name != "mean_reward")
        for name in ("mean", "ci_low", "ci_high", "mean_reward")
    }
    n, n_tasks = _int(result, "n", minimum=1), _int(result, "n_tasks", minimum=1)
    infra = _int(result, "infra_failures")
    confidence = _float(result, "confidence", unit=True) if "confidence" in result else 0.95

    raw = result["episodes"]
    if not isinstance(raw, list) or not raw:
        raise SubmissionError(f"'episodes' must be a non-empty list of per-episode results, got {raw!r:.80}.")
    episodes: list[dict[str, Any]] = []
    for i, e in enumerate(raw):
        where = f"episodes[{i}]: "
        if not isinstance(e, dict):
            raise SubmissionError(f"{where}expected a mapping, got {e!r:.80}.")
        absent = [f for f in EPISODE_FIELDS if f not in e]
        if absent:
            raise SubmissionError(f"{where}lacks {', '.join(absent)}.")
        episode = {
            "task_id": _str(e, "task_id", where),
            "sample": _int({"sample": e.get("sample", 0)}, "sample", where),
            "success": _bool(e, "success", where),
            "reward": _float(e, "reward", where),
            "turns": _int(e, "turns", where),
            "tokens": _int(e, "tokens", where),
            "infra_failure": _bool(e, "infra_failure", where),
        }
        transcript = _transcript(e, where)
        if transcript is not None:  # absent, not None: a result without transcripts keeps its content hash
            episode["transcript"] = transcript
        episodes.append(episode)

    # recompute the summary from the episodes (agents/evaluate.py's `score`, with argym.stats)
    scored = [e for e in episodes if not e["infra_failure"]]
    if not scored:
        raise SubmissionError("Every episode is an infrastructure failure; there is no score to rank.")
    tasks = {e["task_id"] for e in episodes}
    if len(episodes) != n_tasks * k or len(tasks) != n_tasks:
        raise SubmissionError(
            f"{len(episodes)} episodes over {len(tasks)} tasks do not match n_tasks={n_tasks} "
            f"x samples_per_task={k}: the summary does not match the per-episode results."
        )
    if n != len(scored) or infra != len(episodes) - len(scored):
        raise SubmissionError(
            f"n={n}, infra_failures={infra}, but the episodes hold {len(scored)} scored and "
            f"{len(episodes) - len(scored)} infrastructure failures: the summary does not "
            f"match the per-episode results."
        )
    mean, low, high = success_interval(
        [e["success"] for e in scored], [e["task_id"] for e in scored], confidence
    )
    mean_reward = sum(e["reward"] for e in scored) / len(scored)
    for name, value in (("mean", mean), ("ci_low", low), ("ci_high", high), ("mean_reward", mean_reward)):
        _close(name, submitted[name], value)
    pass_k: dict[str, float] = {}
    if k > 1:
        per_task: dict[str, list[bool]] = {}
        for e in scored:
            per_task.setdefault(e["task_id"], []).append(e["success"])
        for j in range(1, k + 1):
            vals = [pass_at_k(len(s), sum(s), j) for s in per_task.values() if len(s) >= j]
            if vals:
                pass_k[f"pass@{j}"] = sum(vals) / len(vals)
    given = result.get("pass_at_k") or {}
    if not isinstance(given, dict):
        raise SubmissionError(f"'pass_at_k' must be a mapping, got {given!r}.")
    for name in given:
        if name not in pass_k:
            raise SubmissionError(f"'pass_at_k' has {name!r}, which {k} sample(s) per task cannot give.")
        _close(f"pass_at_k.{name}", _float(given, name, "pass_at_k: ", unit=True), pass_k[name])

    agent_info = _dict(result, "agent_info") if result.get("agent_info") is not None else {}
    training_run = _dict(result, "training_run") if result.get("training_run") is not None else {}
    wall_s = _float(result, "wall_s") if result.get("wall_s") is not None else None
    git_commit = result.get("git_commit") or ""
    if not isinstance(git_commit, str):
        raise SubmissionError(f"'git_commit' must be a string, got {git_commit!r}.")
    return Submission(
        key=key,
        env_kwargs=env_kwargs,
        task_hash=task_hash,
        sampling=sampling,
        agent=_str(result, "agent"),
        agent_info=agent_info,
        score=mean,
        ci_low=low,
        ci_high=high,
        confidence=confidence,
        mean_reward=mean_reward,
        n=len(scored),
        n_tasks=n_tasks,
        infra_failures=infra,
        pass_at_k=pass_k,
        seed=_int(result, "seed"),
        training_run=training_run,
        argym_version=_str(result, "argym_version"),
        git_commit=git_commit,
        wall_s=wall_s,
        episodes=episodes,
    )
