"""The OpenEnv wire types of a served argym env: one assistant turn in, the conversation and its grading out.

They are pydantic models on openenv-core's `Action`/`Observation`/`State`, so
OpenEnv's clients (``GenericEnvClient`` or a typed ``EnvClient``) read them
unchanged. An observation carries everything argym's `step` returns: the whole
conversation (``messages``), the reward and its parts, the verdict, success,
infra_failure, terminated and truncated (``done`` is either).
"""

from __future__ import annotations

import json
from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class ArgymAction(Action):
    """One assistant turn: its text and, optionally, OpenAI-style ``tool_calls``."""

    content: str = Field(default="", description="The assistant's turn (text).")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, description="OpenAI tool_calls, if any.")

    def message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = self.tool_calls
        return msg


class ArgymObservation(Observation):
    """The conversation so far and, after a step, how the turn was graded (argym's `info`)."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="The whole conversation so far.")
    reward_parts: dict[str, float] = Field(default_factory=dict, description="Every part summed into reward.")
    verdict: dict[str, Any] = Field(default_factory=dict, description="Why: parsed answer, tests, errors.")
    success: bool = False
    infra_failure: bool = Field(default=False, description="A harness fault, never the agent's failure.")
    terminated: bool = False
    truncated: bool = False
    task_id: str | None = None
    turn: int = 0


class ArgymState(State):
    """Which argym env a session runs and where its episode stands."""

    env_id: str
    task_id: str | None = None
    split: str | None = None
    done: bool = True


def jsonable(value: Any) -> Any:
    """`value` as JSON would carry it (tuples become lists, unknown objects their str)."""
    return json.loads(json.dumps(value, default=str))
