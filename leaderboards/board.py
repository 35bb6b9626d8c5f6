"""Boards: the submissions that share a board key, ranked.

Ranking: by score (the success rate), higher first; ties broken by the
interval — the higher lower bound first (the more certain result), then more
episodes, then the earlier submission. A row whose interval overlaps the
leader's is marked (`overlaps_leader`): the data cannot tell it from the
leader at the stated confidence. "Best per agent" keeps each agent's top row;
filters select by agent (substring) and submission date.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from argym.errors import ConfigError


@dataclass
class Row:
    """One ranked submission on a board."""

    rank: int
    id: int
    agent: str
    score: float
    ci_low: float
    ci_high: float
    n: int
    n_tasks: int
    samples_per_task: int
    mean_reward: float
    infra_failures: int
    submitted_at: str
    seed: int
    overlaps_leader: bool = False
    pass_at_k: dict[str, float] = field(default_factory=dict)
    agent_info: dict[str, Any] = field(default_factory=dict)
    training_run: dict[str, Any] = field(default_factory=dict)
    argym_version: str = ""
    git_commit: str | None = None
    wall_s: float | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    """How the agent decoded: ``{"temperature", "top_p", "max_new_tokens"}``."""

    @property
    def display_agent(self) -> str:
        """The agent, with the training step when the submission names one."""
        step = self.training_run.get("step")
        return self.agent if step is None else f"{self.agent} (step {step})"

    @property
    def display_sampling(self) -> str:
        """The sampling settings in a few characters: ``T=0 max=16`` (top-p only when it cuts)."""
        s = self.sampling
        if not s:
            return ""
        temp = s.get("temperature", "?")
        out = f"T={temp:g}" if isinstance(temp, (int, float)) else f"T={temp}"
        if s.get("top_p", 1.0) != 1.0:
            out += f" top_p={s['top_p']:g}"
        return out + (f" max={s['max_new_tokens']}" if "max_new_tokens" in s else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Board:
    """One board key and its ranked rows."""

    key: str
    env_id: str
    split: str
    label: str
    spec: dict[str, Any]
    env_kwargs: dict[str, Any]
    """The env kwargs, with the env's defaults filled in (as first submitted)."""
    rows: list[Row]
    aliases: list[str] = field(default_factory=list)
    """Keys this board had in an older store (schema 3 keyed boards by sampling too); they still find it."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "env_id": self.env_id,
            "split": self.split,
            "label": self.label,
            "spec": self.spec,
            "env_kwargs": self.env_kwargs,
            "rows": [r.to_dict() for r in self.rows],
            "aliases": self.aliases,
        }


def _sort_key(r: dict[str, Any]) -> tuple:
    return (-r["score"], -r["ci_low"], -r["n"], r["submitted_at"], r["id"])


def parse_date(value: str | datetime | None, what: str) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
    try:
        d = datetime.fromisoformat(str(value))
    except ValueError as e:
        raise ConfigError(f"{what} must be a date like 2026-11-30 or 2026-11-30T12:00, got {value!r}.") from e
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def rank(
    raw: list[dict[str, Any]],
    *,
    best_per_agent: bool = False,
    agent: str | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
) -> list[Row]:
    """Filter and rank a board's stored rows (`Store.rows`)."""
    lo, hi = parse_date(since, "since"), parse_date(until, "until")
    rows = [r for r in raw if agent is None or agent.lower() in r["agent"].lower()]
    if lo or hi:

        def when(r: dict[str, Any]) -> datetime:
            return parse_date(r["submitted_at"], "submitted_at")  # type: ignore[return-value]

        rows = [r for r in rows if (lo is None or when(r) >= lo) and (hi is None or when(r) <= hi)]
    rows.sort(key=_sort_key)
    if best_per_agent:
        seen: set[str] = set()
        best = []
        for r in rows:
            if r["agent"] not in seen:
                seen.add(r["agent"])
                best.append(r)
        rows = best
    out: list[Row] = []
    for i, r in enumerate(rows):
        leader = rows[0]
        out.append(
            Row(
                rank=i + 1,
                id=r["id"],
                agent=r["agent"],
                score=r["score"],
                ci_low=r["ci_low"],
                ci_high=r["ci_high"],
                n=r["n"],
                n_tasks=r["n_tasks"],
                samples_per_task=r["samples_per_task"],
                mean_reward=r["mean_reward"],
                infra_failures=r["infra_failures"],
                submitted_at=r["submitted_at"],
                seed=r["seed"],
                overlaps_leader=i > 0
                and r["ci_high"] >= leader["ci_low"]
                and r["ci_low"] <= leader["ci_high"],
                pass_at_k=r["pass_at_k"],
                agent_info=r["agent_info"],
                training_run=r["training_run"],
                argym_version=r["argym_version"],
                git_commit=r["git_commit"],
                wall_s=r["wall_s"],
                sampling=r["sampling"],
            )
        )
    return out
