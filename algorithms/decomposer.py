"""Decomposer-Reasoner, utility mode: hints rewarded by how much they help (after A²D, arXiv 2602.00759).

Where sub-answers cannot be verified (so the verified wrapper,
`argym.envs.wrappers.DecomposeReasoner`, does not apply), A²D trains a
*decomposer* that writes sub-question hints and a *reasoner* that solves the
task, and the only verifiable signal stays the final answer (arXiv 2602.00759):

- per task the reasoner first samples `group_size` ordinary rollouts;
- the decomposer writes `hint_sets` hint lists for the task (a role prompt);
  with `adaptive` (A²D's trigger) only for tasks the reasoner did not always solve;
- for each hint list the reasoner samples `hint_samples` rollouts with the hints
  in context; the decomposer's reward is the utility
  success rate with hints − success rate without (Δ pass@1 over the samples);
- the reasoner trains on its ordinary rollouts plus the hint-guided successes
  with the hints removed (A²D's in-context distillation), in the task's group;
  the decomposer's samples form a group of their own per task.

Decomposer and reasoner are one policy with two role prompts by default; pass
another `decomposer` policy to `UtilityDecomposer` to use two (only the
learner's policy is trained). argym simplifies A²D: no format reward, and the
utility is the mean success difference rather than a pass@k estimate.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from argym.agents.policy import SamplingParams, generate_versioned
from argym.agents.rollout import EpisodeRunner
from argym.algorithms.r3l.retry import distill
from argym.algorithms.strategy_configs import DecomposerConfig
from argym.errors import ConfigError
from argym.types import Message, Task, Trajectory

DECOMPOSER_PROMPT = "Do not solve it. Write the sub-questions that solve it, one per line."
HINT_HEADER = "Hints:"


def decomposer_messages(task: Task) -> list[Message]:
    """The decomposer's role prompt: the task's question, then the request for sub-questions."""
    return [*[m.copy() for m in task.prompt], {"role": "user", "content": DECOMPOSER_PROMPT}]


def with_hints(task: Task, hints: str) -> Task:
    """The task with the hints as one more user message (grading is unchanged: same answer, same tests)."""
    note: Message = {"role": "user", "content": f"{HINT_HEADER}\n{hints.strip()}"}
    return Task(
        id=task.id,
        prompt=(*task.prompt, note),
        split=task.split,
        answer=task.answer,
        tests=task.tests,
        tools=task.tools,
        meta=task.meta,
    )


class UtilityDecomposer:
    """The utility-mode rollout strategy; `run` returns training trajectories and metrics."""

    def __init__(self, engine: EpisodeRunner, config: DecomposerConfig, policy: Any, decomposer: Any = None):
        """`engine`: the rollout engine, or the streaming scheduler (partial rollouts: the plain episodes, then
        the hinted sub-episodes as a second phase, each streamed one by one)."""
        if engine.renderer is None:
            raise ConfigError("The decomposer strategy trains on token contexts; it needs a token policy.")
        self.engine, self.config, self.renderer = engine, config, engine.renderer
        self.decomposer = decomposer if decomposer is not None else policy
        self.trains_decomposer = decomposer is None or decomposer is policy

    def run(
        self, tasks: list[Task], group_size: int, seed: int = 0, sampling: SamplingParams | None = None
    ) -> tuple[list[Trajectory], dict[str, float]]:
        cfg, renderer = self.config, self.renderer
        sampling = sampling or self.engine.sampling
        plain = self.engine.run(tasks, group_size=group_size, seed=seed, sampling=sampling)
        base_rate = [_rate([t for t in plain if t.group == g]) for g in range(len(tasks))]
        chosen = [g for g in range(len(tasks)) if not cfg.adaptive or base_rate[g] < 1.0]
        if not chosen:
            return plain, {"decomposer/triggered": 0.0, "decomposer/plain_success": _rate(plain)}
        # the decomposer's turns: hint_sets per chosen task
        prompts = [
            renderer.prompt_ids(decomposer_messages(tasks[g])) for g in chosen for _ in range(cfg.hint_sets)
        ]
        hint_params = SamplingParams(
            temperature=sampling.temperature, top_p=sampling.top_p, max_new_tokens=cfg.max_hint_tokens
        )
        hints, version = generate_versioned(self.decomposer, prompts, hint_params, seed + 31)
        hinted_tasks = [with_hints(tasks[chosen[h // cfg.hint_sets]], c.text) for h, c in enumerate(hints)]
        guided = self.engine.run(hinted_tasks, group_size=cfg.hint_samples, seed=seed + 53, sampling=sampling)
        out = list(plain)
        utilities, distilled = [], 0
        for h, (prompt, completion, task) in enumerate(zip(prompts, hints, hinted_tasks)):
            g = chosen[h // cfg.hint_sets]
            mine = [t for t in guided if t.group == h]
            utility = _rate(mine) - base_rate[g]  # Δ success: with the hints − without
            utilities.append(utility)
            if self.trains_decomposer:
                out.append(_sample(prompt, completion, utility, tasks[g].id, len(tasks) + g, version))
            if cfg.distill:
                plain_prompt = renderer.prompt_ids([m.copy() for m in tasks[g].prompt], tools=tasks[g].tools)
                guided_prompt = len(renderer.prompt_ids([m.copy() for m in task.prompt], tools=task.tools))
                for t in mine:
                    if t.success and not t.infra_failure:
                        out.append(distill(_regroup(t, g), guided_prompt, plain_prompt))
                        distilled += 1
        out.sort(key=lambda t: t.group)
        return out, {
            "decomposer/triggered": len(chosen) / len(tasks),
            "decomposer/plain_success": _rate(plain),
            "decomposer/hinted_success": _rate(guided),
            "decomposer/utility_mean": sum(utilities) / len(utilities),
            "decomposer/distilled": float(distilled),
        }


def _rate(trajs: list[Trajectory]) -> float:
    scored = [t for t in trajs if not t.infra_failure]
    return sum(t.success for t in scored) / len(scored) if scored else 0.0


def _regroup(traj: Trajectory, group: int) -> Trajectory:
    return dataclasses.replace(traj, group=group)


def _sample(
    prompt: list[int], completion: Any, reward: float, task_id: str, group: int, version: int
) -> Trajectory:
    """The decomposer's turn as a one-turn trajectory rewarded with its utility; `version`: the policy version
    that sampled it (-1: unknown)."""
    return Trajectory(
        task_id=f"{task_id}#decomposer",
        messages=[],
        reward=float(reward),
        success=reward > 0,
        turns=1,
        terminated=True,
        truncated=False,
        token_ids=prompt + completion.token_ids,
        loss_mask=[0] * len(prompt) + [1] * len(completion.token_ids),
        sampler_logprobs=[0.0] * len(prompt) + list(completion.logprobs),
        policy_versions=[-1] * len(prompt) + [version] * len(completion.token_ids),
        turn_rewards=[float(reward)],
        turn_ends=[len(prompt) + len(completion.token_ids) - 1],
        group=group,
    )
