"""`argym/OpenEnv-v0`: a running OpenEnv server as an argym text env.

An OpenEnv env speaks typed actions and observations over a WebSocket session
(openenv-core's ``EnvClient``). This env plays one such session as a
conversation: the server's observation text is a user message, the assistant's
turn is sent as the action's text field, and the server's reward is the turn's
``outcome`` reward part. The episode ends when the server says ``done`` (or at
``max_turns``); it is a success when the last reward is at least
``success_reward``.

Which field carries the text is read from the server's ``/schema``: the
action's one required string field (else its one string field), and the
observation's one string field (else the whole observation as JSON). Name them
with ``action_field=`` / ``observation_field=`` where that is ambiguous.

An argym server (``argym serve``: its observation is argym's own, with
``messages``, ``reward_parts``, ``success`` ...) is read as argym: the
conversation is its ``messages`` (each turn appends the messages the server's
env added), the assistant's whole message is sent (tool calls too), and the
reward parts, success, verdict, infra_failure, terminated and truncated are the
served env's own, so the consumed env grades exactly as the local one; the
served env's turn limit governs (``max_turns`` bounds it only when given).

Tasks are the server's seeds: task ``openenv#N`` resets the server with
``seed=N`` (a procedural source, so train and test are disjoint seed sets); for
an argym server that is the served env's episode for ``seed=N``.
A server that cannot be reached, or answers a step with an error, is an
infrastructure failure, never the agent's.

Example::

    env = argym.make("argym/OpenEnv-v0", url="http://127.0.0.1:8000")
    obs, info = env.reset(seed=0)   # [{"role": "user", "content": <the server's first observation>}]
    obs, reward, terminated, truncated, info = env.step("7")
    # info["reward_parts"] == {"outcome": <the server's reward>}
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, cast

from argym.envs.base import Reply, TextEnv
from argym.envs.tasks import ProceduralSource, TaskSource
from argym.errors import ConfigError, InfrastructureError, MissingDependencyError
from argym.types import Message, Task

RESERVED = {"metadata", "done", "reward"}  # every OpenEnv observation/action has these; never the text
ARGYM_OBSERVATION = {
    "messages",
    "reward_parts",
    "verdict",
    "success",
    "infra_failure",
    "terminated",
    "truncated",
}
"""The fields of `argym serve`'s observation (`argym.envs.openenv.models.ArgymObservation`): a server whose
observation has them all is read as argym, not as text."""


class OpenEnvEnv(TextEnv):
    """An OpenEnv server at `url` as a multi-turn text env; see the module docstring."""

    def __init__(
        self,
        url: str | None = None,
        action_field: str | None = None,
        observation_field: str | None = None,
        max_turns: int | None = None,
        success_reward: float = 1.0,
        timeout_s: float = 60.0,
        test_size: int = 100,
        split: str = "test",
        render_mode: str | None = None,
        executors: Any = None,
    ):
        try:
            from openenv.core import GenericEnvClient
        except ImportError:
            raise MissingDependencyError("openenv-core", "openenv", "argym/OpenEnv-v0") from None
        if url is None:  # a default, so that gym.make says this rather than a bare TypeError
            raise ConfigError(
                "argym/OpenEnv-v0 needs the kwarg url, a running OpenEnv server's address: "
                'argym.make("argym/OpenEnv-v0", url="http://127.0.0.1:8000") (`argym serve ENV_ID` starts one).'
            )
        if not isinstance(url, str) or not url.startswith(("http://", "https://", "ws://", "wss://")):
            raise ConfigError(f"url must be an OpenEnv server's address (http://HOST:PORT), got {url!r}.")
        if timeout_s <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s!r}.")
        self.url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.success_reward = float(success_reward)
        self.test_size = int(test_size)
        schema = self._schema()
        self.action_field = text_field(schema.get("action", {}), action_field, "action", prefer_required=True)
        observed = set(schema.get("observation", {}).get("properties", {}))
        self.argym_server = observation_field is None and observed >= ARGYM_OBSERVATION
        self.observation_field = (
            text_field(schema.get("observation", {}), observation_field, "observation")
            if observation_field
            or (not self.argym_server and len(string_fields(schema.get("observation", {}))) == 1)
            else None
        )
        self._client_cls = GenericEnvClient
        self._client: Any = None
        # an argym server's env ends its own episodes (its max_turns); a plain server's get 10 turns by default
        limit = max_turns if max_turns is not None else (1_000_000 if self.argym_server else 10)
        super().__init__(split=split, max_turns=limit, render_mode=render_mode, executors=executors)

    # ---- the TextEnv hooks ---------------------------------------------------------
    def load_tasks(self, tasks: Any) -> TaskSource:
        return ProceduralSource("openenv", seed_task, test_size=self.test_size)

    def begin(self, task: Task) -> list[Message]:
        try:
            result = self._session().reset(seed=int(task.meta["seed"]))
        except Exception as e:
            self._drop()
            raise InfrastructureError(f"The OpenEnv server at {self.url} did not reset: {e}") from e
        if self.argym_server:
            return [message(m) for m in result.observation["messages"]]
        return [{"role": "user", "content": self.text(result.observation)}]

    def respond(self, action: Message) -> Reply:
        sent: dict[str, Any] = {self.action_field: action.get("content") or ""}
        if self.argym_server and action.get("tool_calls"):
            sent["tool_calls"] = action["tool_calls"]
        try:
            result = self._session().step(sent)
        except Exception as e:
            self._drop()
            return Reply(
                reward_parts={"outcome": 0.0},
                terminated=True,
                infra_failure=True,
                verdict={"error": f"The OpenEnv server at {self.url} failed the step: {e}"},
            )
        if self.argym_server:
            return self._argym_reply(result.observation)
        reward = float(result.reward or 0.0)
        done = bool(result.done)
        return Reply(
            messages=[{"role": "user", "content": self.text(result.observation)}],
            reward_parts={"outcome": reward},
            terminated=done,
            success=done and reward >= self.success_reward,
            verdict={"observation": result.observation, "reward": result.reward, "done": done},
        )

    def grader_versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"openenv-core": version("openenv-core"), "server": self.url}

    def _argym_reply(self, obs: dict[str, Any]) -> Reply:
        """An argym server's step, as the served env returned it: the messages its env appended after the
        assistant's turn (the conversation here already ends with that turn), and its own grading."""
        messages = obs.get("messages") or []
        return Reply(
            messages=[message(m) for m in messages[len(self._messages) :]],
            reward_parts={str(k): float(v) for k, v in (obs.get("reward_parts") or {}).items()},
            terminated=bool(obs.get("terminated")),
            truncated=bool(obs.get("truncated")),
            success=bool(obs.get("success")),
            verdict=obs.get("verdict") or {},
            infra_failure=bool(obs.get("infra_failure")),
        )

    def text(self, observation: dict[str, Any]) -> str:
        """What the agent reads of an observation: its text field, else all of it as JSON."""
        if self.observation_field is not None:
            return str(observation.get(self.observation_field, ""))
        return json.dumps(observation, sort_keys=True, default=str)

    # ---- the session ---------------------------------------------------------------------
    def _session(self) -> Any:
        if self._client is None:
            self._client = self._client_cls(base_url=self.url, message_timeout_s=self.timeout_s).sync()
            self._client.connect()
        return self._client

    def _drop(self) -> None:
        """Forget a session that failed; the next episode opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:
                pass

    def _schema(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(http_url(self.url) + "/schema", timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise InfrastructureError(
                f"Could not read the OpenEnv server's schema at {http_url(self.url)}/schema "
                f"({e}); is the server running at url={self.url}?"
            ) from e

    def close(self) -> None:
        self._drop()
        super().close()


def message(m: dict[str, Any]) -> Message:
    """A chat message as the wire carried it (a JSON object with role, content and perhaps tool_calls)."""
    return cast(Message, dict(m))


def seed_task(index: int) -> Task:
    """Task N of an OpenEnv server: its episode for ``seed=N`` (the prompt comes from the server on reset)."""
    return Task(
        id="", prompt=({"role": "user", "content": f"OpenEnv episode, seed {index}"},), meta={"seed": index}
    )


def string_fields(schema: dict[str, Any]) -> list[str]:
    props = schema.get("properties", {})
    return [name for name, p in props.items() if name not in RESERVED and p.get("type") == "string"]


def text_field(schema: dict[str, Any], given: str | None, what: str, prefer_required: bool = False) -> str:
    """The field of an action/observation schema that carries text: `given`, or the one string field."""
    props = [n for n in schema.get("properties", {}) if n not in RESERVED]
    if given is not None:
        if given not in props:
            raise ConfigError(
                f"{what}_field={given!r} is not a field of the server's {what}; it has {props}."
            )
        return given
    strings = string_fields(schema)
    required = [n for n in strings if n in schema.get("required", [])] if prefer_required else []
    for candidates in (required, strings):
        if len(candidates) == 1:
            return candidates[0]
    raise ConfigError(
        f"Cannot tell which field of the server's {what} carries the text (string fields: "
        f"{strings or 'none'}; all fields: {props}): pass {what}_field=NAME."
    )


def http_url(url: str) -> str:
    """The HTTP address of a server given as http(s):// or ws(s)://."""
    if url.startswith("ws://"):
        return "http://" + url[len("ws://") :]
    if url.startswith("wss://"):
        return "https://" + url[len("wss://") :]
    return url
