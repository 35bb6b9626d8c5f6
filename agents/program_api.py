"""What an agent program meets (`argym.agents.program` runs it): the tools it is handed (`ProgramTools`) and
how its return value becomes the env's action (`answer_text`). Loading it is `argym.callables.load_function`."""

from __future__ import annotations

import threading
from typing import Any

from argym.agents.episodes import normalize_message
from argym.types import Message, Task


class ProgramTools:
    """The task's tools for a program: `schemas` for the request's ``tools=``, `run` to execute calls in the env."""

    def __init__(self, env: Any, task: Task):
        self._env, self._lock = env, threading.Lock()
        self.schemas: list[dict[str, Any]] = [
            t if "type" in t else {"type": "function", "function": t} for t in (task.tools or ())
        ]
        self.reward = 0.0
        self.infos: list[dict[str, Any]] = []
        self.done = False
        self.closed = False
        self.terminated = self.truncated = False

    def run(self, message: Any) -> list[Message]:
        """Execute an assistant message's tool calls in the env; returns the env's replies (``tool`` messages).

        `message` is what the endpoint returned (the openai client's message object
        or a dict). Once the env's episode is over, nothing runs and [] comes back.
        """
        if hasattr(message, "model_dump"):
            message = message.model_dump(exclude_none=True)
        action = normalize_message(message, "tools.run(message)")
        if not action.get("tool_calls"):
            raise ValueError(
                "tools.run takes an assistant message with tool_calls; return a final answer from "
                "your program instead (argym hands it to the env)."
            )
        with self._lock:
            if self.closed:
                raise RuntimeError(
                    "This episode is over (it ran past its deadline); its tools no longer run."
                )
            if self.done:
                return []
            obs, reward, terminated, truncated, info = self._env.step(action)
            self.record(reward, terminated, truncated, info)
        last = max(i for i, m in enumerate(obs) if m.get("role") == "assistant")
        return [m.copy() for m in obs[last + 1 :]]

    def close(self) -> None:
        """The episode is over (finished or abandoned): `run` refuses from now on."""
        with self._lock:
            self.closed = True

    def record(self, reward: float, terminated: bool, truncated: bool, info: dict[str, Any]) -> None:
        """One env step's outcome (a tool turn, or the final answer the runner hands in)."""
        self.reward += float(reward)
        self.infos.append(info)
        self.terminated, self.truncated = terminated, truncated
        self.done = terminated or truncated


def answer_text(result: Any) -> str:
    """A program's return value as the env's action: a string, or an assistant message's content."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    if hasattr(result, "content"):
        return str(result.content or "")
    if isinstance(result, dict):
        return str(result.get("content") or "")
    return str(result)
