"""R³L reflections: the prompt, the JSON parse with its fallback, and the two reflectors."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from argym.agents.policy import SamplingParams, generate_versioned
from argym.types import Message, Trajectory

FALLBACK_GUIDANCE = "Your previous attempt failed. Check each step before you answer."
RULE_SUGGESTION = "Redo this step carefully."


@dataclass
class Sampled:
    """What the policy sampled for a reflection: the prompt, the sampled ids, their log-probs and the policy
    version that sampled them (-1: unknown); `r3l.train_reflections` trains it."""

    prompt: list[int]
    ids: list[int]
    logprobs: list[float]
    version: int


@dataclass
class Reflection:
    """A structured reflection on one failed trajectory; `fallback` says why the parse fell back, if it did;
    `sampled`: the policy's sample it was parsed from (None: a rule's). It travels with the reflection rather
    than staying on the reflector, which batches in flight together share (partial rollouts)."""

    retry_from_step: int
    suggestion: str
    summary: str = ""
    root_cause: str = ""
    outcome: str = "failure"
    fallback: str | None = None
    sampled: Sampled | None = None

    @property
    def guidance(self) -> str:
        """The text inserted at the pivot."""
        cause = f" Root cause: {self.root_cause}" if self.root_cause else ""
        return f"Hint from a previous attempt:{cause} {self.suggestion}".strip()


def reflection_prompt(messages: list[Message]) -> list[Message]:
    """The paper's reflection request: the trajectory with numbered steps, answer in JSON."""
    lines, step = [], 0
    for m in messages:
        if m.get("role") == "assistant":
            lines.append(f"[step {step}] assistant: {m.get('content', '')}")
            step += 1
        else:
            lines.append(f"{m.get('role', '?')}: {m.get('content', '')}")
    ask = (
        "The attempt above failed. Reflect on it. Reply with one JSON object with keys "
        '"trajectory_summary", "root_cause_analysis", "trajectory_outcome" (success, '
        'success_but_inefficient or failure), "improvement_suggestion" and "retry_from_step" '
        f"(the earliest step, 0 to {max(step - 1, 0)}, where the root cause shows)."
    )
    return [{"role": "user", "content": "\n".join(lines) + "\n\n" + ask}]


def parse_reflection(text: str, num_steps: int) -> Reflection:
    """Read the reflection's JSON; anything malformed falls back to a retry from step 0 with generic guidance.

    The step is clamped into ``[0, num_steps − 1]``; a missing suggestion falls
    back to the generic one. `Reflection.fallback` records what was wrong.
    """
    last = max(num_steps - 1, 0)
    obj = _first_json_object(text)
    if obj is None:
        return Reflection(0, FALLBACK_GUIDANCE, fallback="no JSON object in the reflection")
    raw_step = obj.get("retry_from_step")
    try:
        if not isinstance(raw_step, (int, float, str)):  # null, a list or an object
            raise TypeError(raw_step)
        step = int(raw_step)
        problem = None if 0 <= step <= last else f"retry_from_step {step} outside 0..{last}"
    except (TypeError, ValueError, OverflowError):  # OverflowError: JSON's Infinity
        step, problem = 0, f"retry_from_step {raw_step!r} is not an integer"
    suggestion = str(obj.get("improvement_suggestion") or "").strip()
    if not suggestion:
        suggestion, problem = FALLBACK_GUIDANCE, problem or "no improvement_suggestion"
    return Reflection(
        min(max(step, 0), last),
        suggestion[:500],
        summary=str(obj.get("trajectory_summary", ""))[:500],
        root_cause=str(obj.get("root_cause_analysis", "") or "")[:500],
        outcome=str(obj.get("trajectory_outcome", "failure")),
        fallback=problem,
    )


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first ``{...}`` in `text` that parses as a JSON object (a fenced block or bare)."""
    for m in re.finditer(r"\{", text):
        depth = 0
        for j in range(m.start(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                try:
                    obj = json.loads(text[m.start() : j + 1])
                except json.JSONDecodeError:
                    break
                return obj if isinstance(obj, dict) else None
    return None


class RuleReflector:
    """Pivot and guidance from the env's verdicts: the first turn that the env scored as wrong.

    Reads, per turn's info: ``step_score == 0`` (DecomposeReasoner), a verdict
    with ``correct: False`` (Math), rejected sub-questions, or failed tests
    (Code); falls back to the last turn. The guidance quotes the verdict.
    """

    def reflect(
        self, trajectories: list[Trajectory], seed: int = 0, sampling: SamplingParams | None = None
    ) -> list[Reflection]:
        """One reflection per trajectory (`sampling` is unused: nothing is sampled)."""
        return [self._one(t) for t in trajectories]

    def _one(self, traj: Trajectory) -> Reflection:
        for k, info in enumerate(traj.infos):
            v = info.get("verdict", {}) or {}
            if (
                info.get("step_score") == 0.0
                or v.get("rejected")
                or v.get("correct") is False
                or v.get("error")
                or (v.get("failed") or 0) > 0
            ):
                return Reflection(
                    k, RULE_SUGGESTION, summary=f"went wrong at turn {k}", root_cause=_describe(v)
                )
        return Reflection(max(traj.turns - 1, 0), FALLBACK_GUIDANCE, fallback="no turn marked wrong")


def _describe(verdict: dict[str, Any]) -> str:
    if verdict.get("rejected"):
        return (
            "Sub-questions "
            + "; ".join(f"{r['text']!r} ({r['reason']})" for r in verdict["rejected"])
            + " were not checkable."
        )
    if verdict.get("question") is not None:
        return f"The answer {verdict.get('parsed')} to {verdict['question']} was wrong."
    if verdict.get("error"):
        return str(verdict["error"])[:300]
    if "parsed" in verdict:
        return (
            "No boxed answer was given."
            if verdict["parsed"] is None
            else f"The answer {verdict['parsed']} was wrong."
        )
    return str(verdict)[:300] if verdict else FALLBACK_GUIDANCE


class PolicyReflector:
    """The policy reflects on its own failures (the paper's setting, for instruct models).

    Reflections are sampled with the rollout's own sampling settings (temperature,
    top-p), only the token budget is `max_tokens`: with ``r3l.train_reflections`` they
    are trained like any rollout, and the learner computes log-probs at the configured
    temperature, so sampling them at another one would make every reflection off-policy.
    """

    def __init__(self, policy: Any, max_tokens: int = 256, renderer: Any = None):
        """`policy`: who samples the reflections, the run's generator in training (a `VersionedGenerator`,
        which reports the version that sampled them); `renderer`: its chat renderer (default `policy.renderer`)."""
        self.policy, self.renderer = policy, renderer if renderer is not None else policy.renderer
        self.max_tokens = max_tokens

    def reflect(
        self, trajectories: list[Trajectory], seed: int = 0, sampling: SamplingParams | None = None
    ) -> list[Reflection]:
        """One reflection per trajectory, sampled with `sampling` (the rollout's; default `SamplingParams()`)."""
        params = dataclasses.replace(sampling or SamplingParams(), max_new_tokens=self.max_tokens)
        prompts = [self.renderer.prompt_ids(reflection_prompt(t.messages)) for t in trajectories]
        outs, version = generate_versioned(self.policy, prompts, params, seed)
        return [
            dataclasses.replace(
                parse_reflection(c.text, max(t.turns, 1)),
                sampled=Sampled(p, list(c.token_ids), list(c.logprobs), version),
            )
            for p, c, t in zip(prompts, outs, trajectories)
        ]
