"""TRL's `GRPOTrainer` on an env served by ``argym serve``: a multi-turn `rollout_func` over OpenEnv sessions.

TRL (pinned: the ``trl`` extra, 1.16) has two multi-turn modes. ``environment_factory`` exposes an
env's methods as tools and needs a chat template that renders ``tool_calls`` itself; SmolLM2's does
not, and TRL refuses it ("The provided chat template does not support tool calling ...", checked by
`trl.chat_template_utils.supports_tool_calling`). ``rollout_func`` hands the rollout to the caller,
which is what this module fills in: each episode is one OpenEnv WebSocket session (openenv-core's
`GenericEnvClient`) on the served argym env, the policy is TRL's own model being trained (sampled
through argym's `HFPolicy`, so both trainers sample the same way), and the token layout is argym's
(`ChatRenderer`: the policy's ids kept as generated, the env's replies rendered and appended with
mask 0, TRL's ``env_mask``). The env grades the episode; its summed reward reaches TRL as the extra
field ``env_reward``, which `env_reward` passes through as the reward function.

Example::

    rollout = ServedRollout(url, max_new_tokens=64, max_total_tokens=1024)
    data = rollout.dataset(range(64))            # prompts of the served split's tasks, by seed
    trainer = GRPOTrainer(model, reward_funcs=env_reward, train_dataset=data,
                          rollout_func=rollout, args=GRPOConfig(...), processing_class=tok)
    trainer.train()                              # rollout.episodes: per-episode figures
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from argym.agents.hf import HFPolicy
from argym.agents.policy import SamplingParams
from argym.errors import ConfigError, InfrastructureError, MissingDependencyError


def env_reward(completions: list[Any], env_reward: list[float], **kwargs: Any) -> list[float]:
    """TRL's reward function for a `ServedRollout`: the served env's own reward, as it graded the episode."""
    return [float(r) for r in env_reward]


@dataclass
class _Episode:
    client: Any
    task_id: str
    ids: list[int] = field(default_factory=list)
    prompt_len: int = 0
    mask: list[int] = field(default_factory=list)  # over the completion part: 1 policy, 0 env
    logprobs: list[float] = field(default_factory=list)
    seen: int = 0  # messages of the conversation already in `ids`
    reward: float = 0.0
    done: bool = False
    obs: dict[str, Any] = field(default_factory=dict)

    def extend(self, ids: list[int], policy: bool, logprobs: list[float] | None = None) -> None:
        self.ids += ids
        self.mask += [int(policy)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)


class ServedRollout:
    """TRL's ``rollout_func`` over the argym env served at `url` (see the module docstring).

    `max_new_tokens` bounds one turn and `max_total_tokens` the whole episode (prompt, turns and
    env replies), as argym's rollout engine does; the env's own `max_turns` bounds the turns.
    Sampling uses TRL's ``temperature`` and ``top_p``. After each call `episodes` holds one dict per
    episode: ``task_id, reward, success, turns, finish`` and the last verdict.
    """

    def __init__(self, url: str, *, max_new_tokens: int, max_total_tokens: int, seed: int = 0):
        try:
            from openenv.core import GenericEnvClient
        except ImportError:
            raise MissingDependencyError("openenv-core", "openenv", "ServedRollout") from None
        if max_new_tokens < 1 or max_total_tokens <= max_new_tokens:
            raise ConfigError(
                f"need 0 < max_new_tokens < max_total_tokens, got {max_new_tokens} and {max_total_tokens}."
            )
        self.client_class = GenericEnvClient
        self.url = url.rstrip("/")
        self.max_new_tokens, self.max_total_tokens, self.seed = max_new_tokens, max_total_tokens, seed
        self.task_ids: dict[str, str] = {}
        self.episodes: list[dict[str, Any]] = []
        self.calls = 0
        self._policy: HFPolicy | None = None

    def dataset(self, seeds: Any) -> Any:
        """A TRL train dataset of the served split's tasks, one row per seed (`reset(seed=s)` picks them)."""
        from datasets import Dataset

        prompts = []
        with self.client_class(base_url=self.url).sync() as client:
            for s in seeds:
                obs = client.reset(seed=int(s)).observation
                self.task_ids[_key(obs["messages"])] = obs["task_id"]
                prompts.append(obs["messages"])
        return Dataset.from_dict({"prompt": prompts})

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        policy = self._policy_of(trainer)
        args = trainer.args
        sampling = SamplingParams(args.temperature, args.top_p or 1.0, self.max_new_tokens)
        missing = [p for p in prompts if _key(p) not in self.task_ids]
        if missing:
            raise ConfigError(
                "a prompt that ServedRollout.dataset did not make reached the rollout; build the train dataset "
                f"with rollout.dataset(seeds). First: {json.dumps(missing[0])[:200]}"
            )
        episodes = [
            _Episode(self.client_class(base_url=self.url).sync(), self.task_ids[_key(p)]) for p in prompts
        ]
        try:
            with ThreadPoolExecutor(max_workers=min(len(episodes), 32)) as pool:
                for ep, obs in zip(episodes, pool.map(_open_and_reset, episodes)):
                    ep.obs = obs
                    ep.extend(policy.renderer.prompt_ids(obs["messages"]), policy=False)
                    if len(ep.ids) >= self.max_total_tokens:
                        raise ConfigError(
                            f"task {ep.task_id!r}'s prompt has {len(ep.ids)} tokens, which leaves no room under "
                            f"max_total_tokens={self.max_total_tokens}; raise it."
                        )
                    ep.prompt_len, ep.mask, ep.logprobs = len(ep.ids), [], []
                    ep.seen = len(obs["messages"])
                live, turn = list(episodes), 0
                while live:
                    live = self._turn(
                        policy, pool, live, sampling, self.seed * 1000 + self.calls * 100 + turn
                    )
                    turn += 1
        finally:
            for ep in episodes:
                ep.client.close()
        self.calls += 1
        self.episodes = [_figures(ep) for ep in episodes]
        return {
            "prompt_ids": [ep.ids[: ep.prompt_len] for ep in episodes],
            "completion_ids": [ep.ids[ep.prompt_len :] for ep in episodes],
            "logprobs": [ep.logprobs for ep in episodes],
            "env_mask": [ep.mask for ep in episodes],
            "env_reward": [ep.reward for ep in episodes],
        }

    def _turn(
        self,
        policy: HFPolicy,
        pool: ThreadPoolExecutor,
        live: list[_Episode],
        sampling: SamplingParams,
        seed: int,
    ) -> list[_Episode]:
        """One turn of every live episode: generate, step the served env, append its reply; the still-live ones."""
        import torch

        limits = [min(self.max_new_tokens, self.max_total_tokens - len(ep.ids)) for ep in live]
        was_training = policy.model.training
        policy.model.eval()
        with torch.no_grad():
            completions = policy.generate(
                [ep.ids for ep in live],
                SamplingParams(sampling.temperature, sampling.top_p, max(limits)),
                seed,
            )
        policy.model.train(was_training)
        completions = [c.cut(n, policy.renderer.decode) for c, n in zip(completions, limits)]
        for ep, c in zip(live, completions):
            ep.extend(c.token_ids, policy=True, logprobs=c.logprobs)
        steps = list(pool.map(lambda ec: _step(ec[0], ec[1].text), zip(live, completions)))
        still = []
        for ep, c, obs in zip(live, completions, steps):
            ep.obs = obs
            ep.reward += float(obs.get("reward") or 0.0)
            if obs["done"]:
                ep.done = True
                continue
            new = obs["messages"][ep.seen + 1 :]  # after the assistant turn just sent
            more = policy.renderer.continuation_ids(new, turn_ended=c.finish_reason == "stop")
            if len(ep.ids) + len(more) >= self.max_total_tokens:
                ep.obs["finish"] = "token_budget"  # as argym's engine: the episode ends truncated
                continue
            ep.extend(more, policy=False)
            ep.seen = len(obs["messages"])
            still.append(ep)
        return still

    def _policy_of(self, trainer: Any) -> HFPolicy:
        """argym's sampler over the model TRL trains (the same object: TRL's updates are seen at once)."""
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self._policy is None or self._policy.model is not model:
            self._policy = HFPolicy(model, trainer.processing_class, name="trl")
        return self._policy


def _key(messages: list[dict[str, Any]]) -> str:
    return json.dumps([[m.get("role"), m.get("content")] for m in messages])


def _open_and_reset(ep: _Episode) -> dict[str, Any]:
    ep.client.connect()
    result = ep.client.reset(task_id=ep.task_id)
    return {**result.observation, "done": result.done, "reward": result.reward}


def _step(ep: _Episode, text: str) -> dict[str, Any]:
    try:
        result = ep.client.step({"content": text})
    except Exception as e:  # the server or the connection failed: a harness fault, never the policy's
        raise InfrastructureError(f"the served env failed a step of task {ep.task_id!r}: {e}") from e
    return {**result.observation, "done": result.done, "reward": result.reward}


def _figures(ep: _Episode) -> dict[str, Any]:
    return {
        "task_id": ep.task_id,
        "reward": ep.reward,
        "success": bool(ep.obs.get("success", False)),
        "turns": int(ep.obs.get("turn", 0)),
        "finish": ep.obs.get("finish") or ("done" if ep.done else "truncated"),
        "verdict": ep.obs.get("verdict", {}),
        "messages": ep.obs.get("messages", []),
    }
