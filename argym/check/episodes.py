"""Probing episodes: which actions the checks send, and the trace of what came back.

A check knows nothing of the env's task, so it plays scripts: `GENERIC` text
turns (a plain answer, a boxed number, a code block, a tool call), the env's
own oracle where it has one (`oracle_action`), and, for an env that declares
an exploit family, that family's `MARKS`: actions that leave a mark (a file,
a line of output) an env that leaks state into the next episode would show.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from argym.check.base import Hang, Subject, canonical, family, owner

GENERIC: tuple[str, ...] = (
    "Hello. I am not sure yet.",
    "The answer is 42. \\boxed{42}",
    "```python\nprint(42)\n```",
    '<tool_call>{"name": "run", "arguments": {"command": "ls"}}</tool_call>',
    "I give up.",
)

_MARK_FILE = "/tmp/argym-check-mark"
_CODE_MARK = (
    f"```python\nimport os\nprint('MARK', os.path.exists({_MARK_FILE!r}), sorted(os.listdir('.')))\n"
    f"open({_MARK_FILE!r}, 'a').write('x')\nopen('argym-check-mark', 'a').write('x')\n```"
)
MARKS: dict[str, tuple[str, ...]] = {
    "code": (_CODE_MARK,),
    "swe": (
        '<tool_call>{"name": "run", "arguments": {"command": "ls -a /tmp .; cat %s; echo x >> %s; '
        'echo x >> argym-check-mark; git stash list; git log --all --oneline | wc -l"}}</tool_call>'
        % (_MARK_FILE, _MARK_FILE),
    ),
    "toolcall": (
        '<tool_call>{"name": "python", "arguments": {"code": %s}}</tool_call>'
        % canonical(_CODE_MARK.split("\n", 1)[1].rsplit("```", 1)[0]),
        '<tool_call>{"name": "kv_set", "arguments": {"key": "argym-check-mark", "value": "x"}}</tool_call>'
        '<tool_call>{"name": "kv_get", "arguments": {"key": "argym-check-mark"}}</tool_call>',
    ),
}
"""Actions that leave a mark, by exploit family (the isolation check looks for it in the next episode)."""

Script = Callable[[gym.Env, int], Any]


def generic_script(env: gym.Env) -> Script:
    """The env family's marks first, then the generic turns, round robin."""
    actions = (*MARKS.get(family(env) or "", ()), *GENERIC)
    return lambda _env, i: actions[i % len(actions)]


def oracle_script(env: gym.Env) -> Script | None:
    """The env's oracle (`oracle_action()`), or None if it has none."""
    from argym.envs.base import TextEnv

    o = owner(env, "oracle_action")
    if o is None or type(o).oracle_action is TextEnv.oracle_action:  # the base class's raises: no oracle
        return None
    return lambda _env, _i: o.oracle_action()


@dataclass
class Trace:
    """What one episode returned: the reset and each step, in canonical text form, and the actions sent."""

    reset: str = ""
    steps: list[str] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    hang: str | None = None

    def records(self) -> list[str]:
        return [self.reset, *self.steps]

    def to_dict(self) -> dict[str, Any]:
        return {"records": self.records(), "hang": self.hang}


def play(
    subject: Subject,
    env: Any,
    script: Script,
    seed: int | None,
    max_steps: int,
    options: dict[str, Any] | None = None,
    label: str = "episode",
    start: int = 0,
    reset: bool = True,
) -> Trace:
    """Reset (unless `reset` is False) and step `env` with `script` until the episode ends or `max_steps`."""
    trace = Trace()
    try:
        if reset:
            obs, info = subject.reset(env, seed=seed, options=options, label=label)
            trace.reset = canonical([obs, info])
        for i in range(start, start + max_steps):
            action = subject.call(env, "action", functools.partial(script, env, i), label)
            trace.actions.append(action)
            obs, reward, terminated, truncated, info = subject.step(env, action, label=f"{label} step {i}")
            trace.steps.append(canonical([obs, float(reward), bool(terminated), bool(truncated), info]))
            trace.rewards.append(float(reward))
            trace.infos.append(info)
            if terminated or truncated:
                trace.done = True
                break
    except Hang as e:
        trace.hang = str(e)
    return trace


def scripts_of(env: gym.Env) -> dict[str, Script]:
    out = {"generic": generic_script(env)}
    oracle = oracle_script(env)
    if oracle is not None:
        out["oracle"] = oracle
    return out


def episode(subject: Subject, script_name: str) -> Trace:
    """One episode of `script_name` on a fresh instance (closed after)."""
    env = subject.make()
    try:
        return play(
            subject,
            env,
            scripts_of(env)[script_name],
            subject.config.seed,
            subject.config.max_steps,
            label=f"determinism {script_name}",
        )
    finally:
        subject.close(env)


def first_difference(a: list[str], b: list[str]) -> str:
    """Where two traces part: the record index and both sides, shortened."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            j = next((k for k, (c, d) in enumerate(zip(x, y)) if c != d), min(len(x), len(y)))
            lo = max(0, j - 60)
            where = "reset" if i == 0 else f"step {i}"
            return f"{where} differs: ...{x[lo : j + 80]!s}... vs ...{y[lo : j + 80]!s}..."
    return f"one run has {len(a)} records, the other {len(b)}"
