"""The tokens check (`argym check ENV --tokens MODEL`): the learner trains on what the sampler saw.

The most common correctness bug in LLM RL trainers is a mismatch between the
tokens the sampler was fed and produced and the tokens the learner trains on:
consecutive tool results rendered as separate turns, a template that
re-renders history differently, a special token dropped, env text inside the
loss mask. This check plays scripted episodes through the real rollout engine
(`RolloutEngine` with the model's tokenizer and chat template, the path
training uses) with a `ScriptedTokenPolicy` that "samples" given turns as
the model would write them (`ChatRenderer.assistant_ids`), then holds each
trajectory to the rules of `argym.check.token_rules` (exact, mask, env outside,
calls, fresh); a failure names the first differing token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymnasium.wrappers import TimeLimit

from argym.agents.policy import Completion, SamplingParams
from argym.agents.renderer import ChatRenderer, with_object_arguments
from argym.check.base import FAIL, NOT_APPLICABLE, PASS, Outcome, Subject, short
from argym.check.episodes import GENERIC, oracle_script
from argym.check.token_rules import Episode, Finding, inspect
from argym.errors import ConfigError
from argym.types import Message, Trajectory

NAME = "tokens"

Action = str | Message
Script = Callable[[Any, int], Action]
"""`(env, turn) -> action`: the assistant turn to sample next (text, or a message with ``tool_calls``)."""


def load_tokenizer(spec: str) -> Any:
    """The tokenizer (with its chat template) a model spec names.

    ``tiny``: the tiny demo tokenizer; ``smollm2`` (any model `argym models`
    knows): its prepared checkpoint's tokenizer, else the one inside its GGUF;
    ``hf:PATH`` or ``PATH``: a checkpoint or tokenizer directory.
    """
    from argym.agents import models
    from argym.agents.hf import load_tokenizer as load_saved

    if spec == "tiny":
        from argym.agents.tiny import build_tiny_tokenizer

        return build_tiny_tokenizer()
    path = spec.removeprefix("hf:")
    if path.lower() in models.MODELS and not Path(path).exists():
        prepared = models.default_checkpoint(path)
        if (prepared / "tokenizer_config.json").is_file():
            return load_saved(prepared)
        from transformers import AutoTokenizer

        gguf = models.find_gguf(models.known(path))
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not Path(path).is_dir():
        raise ConfigError(
            f"--tokens {spec!r}: give tiny, a known model ({', '.join(sorted(models.MODELS))}), "
            "or a checkpoint/tokenizer directory (hf:PATH)."
        )
    return load_saved(path)


class ScriptedTokenPolicy:
    """A token policy that samples given turns: each action of `script`, as the model would write it.

    The action (text, or an assistant message with ``tool_calls``) becomes ids
    through `ChatRenderer.assistant_ids` (content, calls in the model's form,
    end-of-turn), so the engine records it exactly as it records sampled ids.
    A turn longer than ``max_new_tokens`` is cut there (finish reason
    "length"), as a sampler cuts it. Every prompt and completion is kept.
    """

    def __init__(self, tokenizer: Any, script: Script, env: Callable[[], Any], tools: Any = None):
        self.tokenizer = tokenizer
        self.script, self.env, self.tools = script, env, tools
        self.renderer = ChatRenderer(tokenizer)
        self.prompts: list[list[int]] = []
        self.completions: list[list[int]] = []
        self.as_objects: dict[int, list[int]] = {}
        """Turn → its ids with tool-call arguments given to the template as objects, where that differs."""

    def generate(
        self, prompts: list[list[int]], sampling: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        if len(prompts) != 1:
            raise ValueError("ScriptedTokenPolicy drives one episode at a time.")
        action = self.script(self.env(), len(self.completions))
        message: Message = {"role": "assistant", "content": action} if isinstance(action, str) else action
        ids = self.renderer.assistant_ids(message, tools=self.tools)
        if message.get("tool_calls") and self.renderer.native_tools:
            objects = self._with_object_arguments(message)
            if objects is not None and objects != ids:
                self.as_objects[len(self.completions)] = objects
        finish = "stop"
        if len(ids) > sampling.max_new_tokens:
            ids, finish = ids[: sampling.max_new_tokens], "length"
        text = self.renderer.decode(ids[:-1] if finish == "stop" else ids)
        self.prompts.append(list(prompts[0]))
        self.completions.append(list(ids))
        return [Completion(token_ids=ids, logprobs=[-1.0] * len(ids), finish_reason=finish, text=text)]

    def _with_object_arguments(self, message: Message) -> list[int] | None:
        """The turn's ids with each call's arguments as an object, as Hugging Face's chat templates take them
        (OpenAI's wire format has a JSON string); None where the template cannot render that."""
        try:
            ids: list[int] = self.renderer.assistant_ids(with_object_arguments(message), tools=self.tools)
        except Exception:  # a template that wants strings (it concatenates them)
            return None
        return ids


@dataclass
class Play:
    """How one scripted episode is played: its turns, how many, and the most tokens a turn may have."""

    name: str
    script: Script
    max_steps: int
    max_new_tokens: int = 4096


def _oracle(env: Any) -> Script:
    script = oracle_script(env)
    assert script is not None
    return script


def tool_turns(tools: Any) -> list[Action]:
    """Tool calls on the env's tools: two in one turn (consecutive tool results), as an OpenAI message, then
    one after text in Hermes tags; empty without tools."""
    from argym.envs.tools.calls import ToolCall, format_calls

    names = [t["function"]["name"] for t in tools or () if isinstance(t, dict) and "function" in t]
    if not names:
        return []
    first, last = names[0], names[-1]
    return [
        format_calls([ToolCall(first, {}, "call_0"), ToolCall(last, {}, "call_1")], "openai"),
        format_calls([ToolCall(first, {}, "call_2")], "hermes", text="Let me check."),
    ]


def plays(env: Any, tools: Any, long_turns: int) -> list[Play]:
    """The scripted episodes: generic turns, a long history (of tool calls where the env has tools, which
    keep a tool env's episode going), turns cut by the length limit, the oracle, tool calls then an answer."""
    calls = tool_turns(tools)
    long: Script = (
        (lambda _e, i: calls[i % len(calls)])
        if calls
        else (lambda _e, i: GENERIC[(i + 1) % len(GENERIC)] + f" (turn {i})")
    )
    out = [
        Play("generic", lambda _e, i: GENERIC[i % len(GENERIC)], len(GENERIC)),
        Play("long", long, long_turns),
        Play("cut", lambda _e, i: GENERIC[i % len(GENERIC)], 3, max_new_tokens=5),
    ]
    if oracle_script(env) is not None:  # asked of the episode's own env, turn by turn
        out.append(Play("oracle", lambda e, i: _oracle(e)(e, i), long_turns))
    if calls:
        turns = [*calls, "I give up."]
        out.append(Play("tools", lambda _e, i: turns[min(i, len(turns) - 1)], len(turns)))
    return out


def play_episode(
    env_id: str,
    kwargs: dict[str, Any],
    tokenizer: Any,
    play: Play,
    seed: int,
    make: Callable[[str, dict[str, Any]], Any],
    renderer: Callable[[Any], ChatRenderer] = ChatRenderer,
) -> Episode:
    """Play `play` on the task of `seed` through the rollout engine; `renderer` is the engine's (tests swap it)."""
    from argym.agents.rollout import RolloutEngine

    made: list[Any] = []

    def build(env_id: str, kw: dict[str, Any]) -> Any:
        # the play's length is the env's time limit: a scripted policy cannot end an episode itself
        made.append(TimeLimit(make(env_id, kw), max_episode_steps=play.max_steps))
        return made[-1]

    probe = make(env_id, kwargs)
    try:
        probe.reset(seed=seed)
        task = probe.unwrapped.task
    finally:
        probe.close()
    policy = ScriptedTokenPolicy(tokenizer, play.script, lambda: made[0], tools=task.tools)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=play.max_new_tokens)
    with RolloutEngine(
        env_id, kwargs, policy, sampling, max_total_tokens=1 << 30, step_threads=1, make_env=build
    ) as engine:
        engine.renderer = renderer(tokenizer)
        (traj,) = engine.run([task], seed=seed)
    return Episode(
        play.name, traj, policy.prompts, policy.completions, task.tools, as_objects=policy.as_objects
    )


def check(subject: Subject) -> Outcome:
    """The tokens check: every play on the config's seed, with the tokenizer of `config.tokens`."""
    spec = subject.config.tokens
    if not spec:
        return Outcome(NAME, NOT_APPLICABLE, "no model given (argym check ENV --tokens MODEL)")
    tokenizer = load_tokenizer(spec)
    report = run(subject.config.env_id, subject.config.kwargs, tokenizer, seed=subject.config.seed)
    return Outcome(NAME, FAIL if report.findings else PASS, report.summary(spec))


@dataclass
class TokenReport:
    """What the plays found."""

    episodes: list[Episode]

    @property
    def findings(self) -> list[Finding]:
        return [f for e in self.episodes for f in e.findings]

    def summary(self, spec: str) -> str:
        tokens = sum(len(e.trajectory.token_ids) for e in self.episodes)
        turns = sum(len(e.completions) for e in self.episodes)
        plays = ", ".join(e.play for e in self.episodes)
        head = f"{spec}: {len(self.episodes)} episodes ({plays}), {turns} turns, {tokens} tokens"
        if not self.findings:
            return f"{head}; exact, mask on sampled ids only, env text outside it, equal to a fresh rendering"
        return head + "\n" + "\n".join(str(f) for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.__dict__ for f in self.findings], "plays": [e.play for e in self.episodes]}


def run(
    env_id: str,
    kwargs: dict[str, Any],
    tokenizer: Any,
    seed: int = 0,
    long_turns: int = 12,
    make: Callable[[str, dict[str, Any]], Any] | None = None,
    renderer: Callable[[Any], ChatRenderer] = ChatRenderer,
) -> TokenReport:
    """Play every scripted episode of `env_id` with `tokenizer`'s template and inspect each trajectory."""
    from argym.check.base import make_env

    make = make or make_env
    probe: Any = make(env_id, kwargs)
    try:
        probe.reset(seed=seed)
        selected = plays(probe, probe.unwrapped.task.tools, long_turns)
    finally:
        probe.close()
    episodes = []
    for p in selected:
        try:
            ep = play_episode(env_id, kwargs, tokenizer, p, seed, make, renderer)
        except Exception as e:  # a template that cannot render a turn (e.g. tool calls), an env that raises
            empty = Trajectory(p.name, [], 0.0, False, 0, False, False)
            why = f"{type(e).__name__}: {short(str(e), 300)}"
            episodes.append(
                Episode(p.name, empty, [], [], findings=[Finding(p.name, "could not play", 0, why)])
            )
            continue
        ep.findings = inspect(ep, tokenizer)
        episodes.append(ep)
    return TokenReport(episodes)
