"""What an agent program meets (`argym.agents.program` runs it): how it is loaded (`load_function`), the
tools it is handed (`ProgramTools`), and how its return value becomes the env's action (`answer_text`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from argym.agents.episodes import normalize_message

from argym.errors import ConfigError
from argym.types import Message, Task


def load_function(spec: str, what: str = "agent.program") -> Callable[..., Any]:
    """The function ``module:function`` or ``path/to/file.py:function`` names (the working directory is importable)."""
    module_name, sep, fn_name = spec.rpartition(":")
    if not sep or not module_name or not fn_name:
        raise ConfigError(f"{what} must be module:function (e.g. my_agent:solve), got {spec!r}.")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise ConfigError(f"{what}: no file {module_name!r}.")
            loader = importlib.util.spec_from_file_location(path.stem, path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({e}).") from e
    fn: object = getattr(module, fn_name, None)
    if not callable(fn):
        raise ConfigError(f"{what}: {module_name!r} has no function {fn_name!r}.")
    return fn


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
