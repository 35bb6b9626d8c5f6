"""R³L's rollout strategy: ordinary rollouts, reflections, retries from the pivot, pivotal credit."""

from __future__ import annotations

import dataclasses
from typing import Any

from argym.agents.policy import SamplingParams
from argym.agents.rollout import EpisodeRunner, Resume
from argym.algorithms.r3l.reflection import PolicyReflector, Reflection, RuleReflector
from argym.algorithms.strategy_configs import R3LConfig
from argym.errors import ConfigError
from argym.types import Message, Task, Trajectory


def turn_start(traj: Trajectory, k: int) -> int:
    """Index of the first token of turn k's policy tokens (= the end of the context it was sampled from)."""
    if not 0 <= k < len(traj.turn_ends):
        raise ValueError(f"turn {k} does not exist; the trajectory has {len(traj.turn_ends)} turns.")
    start = traj.turn_ends[k - 1] + 1 if k > 0 else 0
    while start < len(traj.loss_mask) and not traj.loss_mask[start]:
        start += 1
    return start


def mask_before(traj: Trajectory, k: int) -> Trajectory:
    """A copy with loss mask 0 on every token before turn k (pivotal credit on the original)."""
    start = turn_start(traj, k)
    mask = [0] * start + list(traj.loss_mask[start:])
    return dataclasses.replace(traj, loss_mask=mask, snapshots=[])


def _assistant_index(messages: list[Message], k: int) -> int:
    seen = -1
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            seen += 1
            if seen == k:
                return i
    raise ValueError(f"the conversation has no assistant turn {k}")


def retry_start(
    traj: Trajectory, reflection: Reflection, renderer: Any, role: str = "user"
) -> tuple[Resume, list[int]]:
    """The guided context to resume from at the pivot, and the plain (guidance-free) one it replaces.

    Before turn k the rollout's exact context is ``token_ids[:turn_start(k)]``.
    The guided one keeps every id up to turn k−1's last policy token, then renders
    the env's messages after it *plus the guidance* (token-exact, as the engine
    renders env replies), ending in the generation prompt.
    """
    k = reflection.retry_from_step
    if k >= len(traj.snapshots):
        raise ValueError(f"no snapshot before turn {k}: roll out with record_snapshots=True.")
    plain = list(traj.token_ids[: turn_start(traj, k)])
    messages = traj.messages[: _assistant_index(traj.messages, k)]
    if role not in ("user", "system"):
        raise ValueError(f"the guidance role must be 'user' or 'system', got {role!r}.")
    guidance: Message = {"role": "system" if role == "system" else "user", "content": reflection.guidance}
    task = traj.snapshots[k].task
    tools = task.tools
    if k == 0:
        if renderer.prompt_ids(messages, tools=tools) != plain:
            raise ValueError("the trajectory's prompt does not match its messages; cannot insert guidance.")
        guided = renderer.prompt_ids(messages + [guidance], tools=tools)
    else:
        keep = traj.turn_ends[k - 1] + 1
        new = messages[_assistant_index(traj.messages, k - 1) + 1 :]
        ended = plain[keep:] == renderer.continuation_ids(new, tools=tools, turn_ended=True)
        if not ended and plain[keep:] != renderer.continuation_ids(new, tools=tools, turn_ended=False):
            raise ValueError(f"turn {k}'s context does not match its messages; cannot insert guidance.")
        guided = plain[:keep] + renderer.continuation_ids(new + [guidance], tools=tools, turn_ended=ended)
    start = Resume(
        task=task,
        group=traj.group,
        state=traj.snapshots[k],
        messages=messages,
        ids=guided,
        turn_rewards=traj.turn_rewards[:k],
        turn_ends=traj.turn_ends[:k],
        infos=traj.infos[:k],
    )
    return start, plain


def distill(guided: Trajectory, guided_prefix: int, plain: list[int]) -> Trajectory:
    """The training copy of a retry: the plain context (no guidance), then the retried suffix.

    Loss mask 0 on the whole plain context (every turn before the pivot) and the
    suffix's mask as sampled; turn ends after the pivot shift by the length
    difference; the sampler's log-probs stay those of the guided sampling (μ).
    """
    shift = len(plain) - guided_prefix
    suffix = slice(guided_prefix, None)
    return dataclasses.replace(
        guided,
        token_ids=plain + guided.token_ids[suffix],
        loss_mask=[0] * len(plain) + guided.loss_mask[suffix],
        sampler_logprobs=[0.0] * len(plain) + guided.sampler_logprobs[suffix],
        policy_versions=[-1] * len(plain) + guided.policy_versions[suffix],
        turn_ends=[e if e < guided_prefix else e + shift for e in guided.turn_ends],
        snapshots=[],
    )


# --------------------------------------------------------------------------- the rollout strategy


class R3LRollout:
    """Ordinary rollouts, reflections on the failed ones, retries from the pivot; see the module docstring."""

    def __init__(self, engine: EpisodeRunner, config: R3LConfig, policy: Any = None):
        """`engine`: the rollout engine, or the streaming scheduler (partial rollouts: the base episodes, then
        the retries resumed from their pivot's snapshot, streamed one by one)."""
        if engine.renderer is None:
            raise ConfigError("R³L retries continue a token context; it needs a token policy (tiny or hf).")
        if config.reflector == "policy" and policy is None:
            raise ConfigError("r3l.reflector 'policy' needs the policy that reflects; pass policy=.")
        self.engine, self.config = engine, config
        self.reflector: RuleReflector | PolicyReflector = (
            PolicyReflector(policy, config.reflection_max_tokens, renderer=engine.renderer)
            if config.reflector == "policy"
            else RuleReflector()
        )

    def run(
        self, tasks: list[Task], group_size: int, seed: int = 0, sampling: SamplingParams | None = None
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """Up to `group_size` training trajectories per task (ordered by task) and R³L's metrics."""
        n_retry = round(group_size * self.config.retry_fraction)
        n_plain = group_size - n_retry
        if n_plain < 1 or n_retry < 1:
            raise ConfigError(
                f"R³L splits each group into ordinary rollouts and retries; group_size {group_size} "
                f"with retry_fraction {self.config.retry_fraction} leaves none of one kind."
            )
        base = self.engine.run(tasks, group_size=n_plain, seed=seed, sampling=sampling, record_snapshots=True)
        failed: list[Trajectory] = []
        for g in range(len(tasks)):  # each failure in turn, as many times as the group has retry slots
            mine = [t for t in base if t.group == g and not t.success and not t.infra_failure and t.turns > 0]
            failed += [mine[i % len(mine)] for i in range(n_retry)] if mine else []
        reflections = self.reflector.reflect(
            failed, seed=seed + 17, sampling=sampling or self.engine.sampling
        )
        starts, plains = (
            zip(
                *[
                    retry_start(t, r, self.engine.renderer, self.config.guidance_role)
                    for t, r in zip(failed, reflections)
                ]
            )
            if failed
            else ((), ())
        )
        guided = self.engine.resume(list(starts), seed=seed + 7_777, sampling=sampling) if starts else []
        retries = [distill(g, len(s.ids), p) for g, s, p in zip(guided, starts, plains)]
        pivot_of: dict[int, int] = {}  # a failure retried more than once keeps its earliest pivot
        for t, r in zip(failed, reflections):
            pivot_of[id(t)] = min(pivot_of.get(id(t), r.retry_from_step), r.retry_from_step)
        out: list[Trajectory] = []
        for t in base:
            if id(t) not in pivot_of:
                out.append(dataclasses.replace(t, snapshots=[]))
            elif self.config.train_failed_original:
                out.append(mask_before(t, pivot_of[id(t)]))
        out += retries
        if self.config.train_reflections:
            out += self._reflection_samples(failed, reflections, retries, len(tasks))
        out.sort(key=lambda t: t.group)  # stable: ordinary rollouts, then retries, per task
        return out, self._metrics(failed, reflections, retries, out)

    def _reflection_samples(
        self,
        failed: list[Trajectory],
        reflections: list[Reflection],
        retries: list[Trajectory],
        num_tasks: int,
    ) -> list[Trajectory]:
        """Each sampled reflection as a one-turn sample, reward 1 if its retry beat the original (group: task + N);
        a rule's reflections sampled nothing."""
        samples = []
        for reflection, orig, retry in zip(reflections, failed, retries):
            if reflection.sampled is None:
                continue
            s = reflection.sampled
            prompt, gen, logprobs, version = s.prompt, s.ids, s.logprobs, s.version
            improved = float(retry.reward > orig.reward)
            samples.append(
                Trajectory(
                    task_id=orig.task_id + "#reflection",
                    messages=[],
                    reward=improved,
                    success=bool(improved),
                    turns=1,
                    terminated=True,
                    truncated=False,
                    token_ids=prompt + gen,
                    loss_mask=[0] * len(prompt) + [1] * len(gen),
                    sampler_logprobs=[0.0] * len(prompt) + list(logprobs),
                    policy_versions=[-1] * len(prompt) + [version] * len(gen),
                    turn_rewards=[improved],
                    turn_ends=[len(prompt) + len(gen) - 1],
                    group=num_tasks + orig.group,
                )
            )
        return samples

    def _metrics(
        self,
        failed: list[Trajectory],
        reflections: list[Reflection],
        retries: list[Trajectory],
        out: list[Trajectory],
    ) -> dict[str, float]:
        tokens = sum(t.num_policy_tokens for t in out)
        m = {
            "r3l/retries": float(len(retries)),
            "r3l/retry_success": sum(t.success for t in retries) / max(len(retries), 1),
            "r3l/retry_improved": sum(r.reward > f.reward for r, f in zip(retries, failed))
            / max(len(retries), 1),
            "r3l/pivot_mean": sum(r.retry_from_step for r in reflections) / max(len(reflections), 1),
            "r3l/reflection_fallback": sum(r.fallback is not None for r in reflections)
            / max(len(reflections), 1),
            "r3l/retry_token_share": sum(t.num_policy_tokens for t in retries) / max(tokens, 1),
        }
        counts: dict[int, int] = {}
        for r in reflections:  # the distribution of pivots (9: 9 or later)
            counts[min(r.retry_from_step, 9)] = counts.get(min(r.retry_from_step, 9), 0) + 1
        m.update({f"r3l/pivot_{k}": c / len(reflections) for k, c in counts.items()})
        return m
