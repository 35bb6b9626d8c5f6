"""The tokens check (`argym check ENV --tokens MODEL`): the learner trains on what the sampler saw.

The most common correctness bug in LLM RL trainers is a mismatch between the
tokens the sampler was fed and produced and the tokens the learner trains on:
consecutive tool results rendered as separate turns, a template that
re-renders history differently, a special token dropped, env text inside the
loss mask. This check plays scripted episodes through the real rollout engine
(`RolloutEngine` with the model's tokenizer and chat template, the path
training uses) with a `ScriptedTokenPolicy` that "samples" given turns as
the model would write them (`ChatRenderer.assistant_ids`), then checks each
trajectory:

- exact: each turn's prompt is the trajectory so far, token for token, and
  the sampled ids follow it verbatim;
- mask: the loss mask is 1 on exactly the sampled ids;
- env outside: every message the env sent is found in the unmasked text;
- calls (templates that render tool calls themselves): a tool-call turn is
  written as the template writes it with object arguments, Hugging Face's
  convention (argym's messages carry OpenAI's JSON string);
- fresh: the recorded ids equal the chat template's rendering of the whole
  conversation, tokenized afresh (what a trainer that re-renders, or a
  server that takes messages, would feed the model).

A failure names the first differing token: its position, expected and got,
and the decoded text around it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gymnasium.wrappers import TimeLimit

from argym.agents.policy import Completion, SamplingParams
from argym.agents.renderer import ChatRenderer, with_object_arguments
from argym.check.base import FAIL, NOT_APPLICABLE, PASS, Outcome, Subject, short
from argym.check.episodes import GENERIC, oracle_script
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


@dataclass
class Finding:
    """What one trajectory got wrong: which property, where, and the evidence."""

    play: str
    rule: str
    position: int
    detail: str

    def __str__(self) -> str:
        return f"{self.play}: {self.rule} at token {self.position}: {self.detail}"


@dataclass
class Episode:
    """One played episode: the trajectory, what the policy was fed and sampled, and the tools it was rendered with."""

    play: str
    trajectory: Trajectory
    prompts: list[list[int]]
    completions: list[list[int]]
    tools: Any = None
    findings: list[Finding] = field(default_factory=list)
    as_objects: dict[int, list[int]] = field(default_factory=dict)
    """Turn → the ids its tool calls get with object arguments, where argym's (string arguments) differ."""


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


def fresh_ids(tokenizer: Any, messages: list[Message], tools: Any) -> list[int]:
    """The chat template's rendering of the whole conversation, tokenized at once."""
    kwargs: dict[str, Any] = {"tokenize": False}
    if tools:
        kwargs["tools"] = list(tools)
    # tool-call arguments as objects: Hugging Face's convention, the form its templates are written for
    text = tokenizer.apply_chat_template([with_object_arguments(m) for m in messages], **kwargs)
    return list(tokenizer.encode(text, add_special_tokens=False))


def first_difference(expected: list[int], got: list[int]) -> int | None:
    """The first position where `got` is not `expected`'s prefix (None when it is)."""
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            return i
    return None if len(got) <= len(expected) else len(expected)


def _token(tokenizer: Any, ids: list[int], i: int) -> str:
    if i >= len(ids):
        return "(end)"
    return f"{ids[i]} {tokenizer.decode([ids[i]], skip_special_tokens=False)!r}"


def window(tokenizer: Any, ids: list[int], i: int, mask: list[int] | None = None, width: int = 24) -> str:
    """The decoded text around position `i`, the token at `i` in ⟦ ⟧; with `mask`, sampled text in « »."""

    def text(lo: int, hi: int) -> str:
        out, span = "", list[tuple[int, bool]]()
        for j in range(lo, min(hi, len(ids))):
            on = bool(mask and j < len(mask) and mask[j])
            if span and on != span[0][1]:
                out += _piece(tokenizer, span)
                span = []
            span.append((ids[j], on))
        return out + (_piece(tokenizer, span) if span else "")

    at = tokenizer.decode(ids[i : i + 1], skip_special_tokens=False) if i < len(ids) else ""
    return repr(text(max(0, i - width), i) + f"⟦{at}⟧" + text(i + 1, i + 1 + width))


def _piece(tokenizer: Any, span: list[tuple[int, bool]]) -> str:
    s = tokenizer.decode([t for t, _ in span], skip_special_tokens=False)
    return f"«{s}»" if span[0][1] else s


def inspect(episode: Episode, tokenizer: Any) -> list[Finding]:
    """Every rule one trajectory breaks (an empty list: it is exact); each finding names its first bad token."""
    traj, name, found = episode.trajectory, episode.play, []
    ids, mask = traj.token_ids, traj.loss_mask
    # exact: each turn's prompt is the trajectory so far, the sampled ids follow it verbatim
    sampled = [0] * len(ids)
    for k, (prompt, completion) in enumerate(zip(episode.prompts, episode.completions)):
        i = first_difference(prompt, ids[: len(prompt)]) if len(ids) >= len(prompt) else len(ids)
        if i is None and len(ids) < len(prompt):
            i = len(ids)
        if i is not None:
            found.append(
                Finding(
                    name,
                    f"turn {k}'s prompt is not the recorded trajectory",
                    i,
                    f"fed {_token(tokenizer, prompt, i)}, recorded {_token(tokenizer, ids, i)}; "
                    f"fed {window(tokenizer, prompt, i)}",
                )
            )
            return found
        end = len(prompt) + len(completion)
        j = first_difference(completion, ids[len(prompt) : end])
        if j is not None or end > len(ids):
            at = len(prompt) + (j or 0)
            found.append(
                Finding(
                    name,
                    f"turn {k}'s sampled ids are not recorded verbatim",
                    at,
                    f"sampled {_token(tokenizer, completion, j or 0)}, recorded {_token(tokenizer, ids, at)}; "
                    f"context {window(tokenizer, ids, at, mask)}",
                )
            )
            return found
        sampled[len(prompt) : end] = [1] * len(completion)
    # mask: exactly the sampled ids
    for i, (m, s) in enumerate(zip(mask, sampled)):
        if bool(m) != bool(s):
            what = "env or prompt token inside the loss mask" if m else "sampled token outside the loss mask"
            found.append(
                Finding(
                    name, what, i, f"{_token(tokenizer, ids, i)}; context {window(tokenizer, ids, i, mask)}"
                )
            )
            break
    if len(mask) != len(ids):
        found.append(Finding(name, "loss mask and token ids differ in length", min(len(mask), len(ids)), ""))
    # env outside: every message the env sent (after the first turn) is in the unmasked text
    env_text = tokenizer.decode([t for t, m in zip(ids, mask) if not m], skip_special_tokens=False)
    first = next((i for i, m in enumerate(traj.messages) if m.get("role") == "assistant"), len(traj.messages))
    pos = 0  # the env's last reply ends the episode: the policy never sees it
    for reply in _replies_shown(traj.messages[first:], len(traj.turn_ends) - 1):
        content = str(reply.get("content") or "")
        at = env_text.find(content, pos)
        if at < 0:
            found.append(
                Finding(
                    name,
                    f"a {reply.get('role')} message the env sent is not in the unmasked text",
                    -1,
                    f"missing {short(content, 120)!r}",
                )
            )
            break
        pos = at + len(content)
    # calls: a tool-call turn as the template writes it with object arguments (its own convention)
    for k, objects in sorted(episode.as_objects.items())[:1]:
        got, at = episode.completions[k], len(episode.prompts[k])
        j = first_difference(objects, got) or 0
        found.append(
            Finding(
                name,
                f"turn {k}'s tool calls are written otherwise than the template writes them",
                at + j,
                f"with arguments as an object {_token(tokenizer, objects, j)}, as argym passes them (a JSON "
                f"string) {_token(tokenizer, got, j)}; expected {window(tokenizer, objects, j)}, "
                f"got {window(tokenizer, got, j)}",
            )
        )
    # fresh: the template's rendering of the whole conversation, tokenized afresh
    expected = fresh_ids(tokenizer, traj.messages, episode.tools)
    i = first_difference(expected, ids)
    if i is not None:
        found.append(
            Finding(
                name,
                "recorded ids differ from a fresh rendering of the conversation",
                i,
                f"expected {_token(tokenizer, expected, i)}, got {_token(tokenizer, ids, i)}; "
                f"expected {window(tokenizer, expected, i)}, got {window(tokenizer, ids, i, mask)}; "
                + _where(i, mask),
            )
        )
    return found


def _where(i: int, mask: list[int]) -> str:
    """What a difference from the fresh rendering at `i` most likely means, by where it falls."""
    if i < len(mask) and mask[i]:
        return (
            "inside a sampled turn: the template writes the assistant's message otherwise than the policy "
            "generated it (an empty <think> block on the last turn, tool calls in another layout); "
            "training keeps the sampled ids, a server that takes messages would show the model other text"
        )
    return (
        "in env text: the env's messages render otherwise after the policy's turns than in the whole "
        "conversation (consecutive tool results split, a special token dropped, or a template that "
        "rewrites earlier turns)"
    )


def _replies_shown(messages: list[Message], turns: int) -> list[Message]:
    """The env's messages that follow the first `turns` assistant turns (the ones the policy was shown)."""
    out: list[Message] = []
    seen = 0
    for m in messages:
        if m.get("role") == "assistant":
            seen += 1
            if seen > turns:
                break
        elif seen:
            out.append(m)
    return out


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
