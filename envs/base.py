"""`TextEnv`: the contract every argym environment keeps.

A subclass supplies tasks (`load_tasks`), the env's answer to an assistant
turn (`respond`) and optionally a scripted solution (`oracle_action`); the
base class owns the episode loop, turn limits, action parsing, snapshots and
errors. See docs/design.md, "The environment contract"; README.md, "Write your
own env", builds one and runs it through `argym eval` and `argym train`.

Example episode (argym/Math-v0)::

    obs, info = env.reset(seed=0)
    # obs == [{"role": "user", "content": "What is 12 + 30? Put the final answer in \\boxed{}."}]
    obs, reward, terminated, truncated, info = env.step("12 + 30 = \\boxed{42}")
    # obs[-1] == {"role": "assistant", "content": "12 + 30 = \\boxed{42}"}
    # reward == 1.0, terminated is True, info["success"] is True
    # info["reward_parts"] == {"outcome": 1.0}
    # info["verdict"] == {"parsed": "42", "correct": True, ...}
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym

from argym.envs.executors import Executors
from argym.envs.spaces import Conversation, UnicodeText
from argym.envs.tasks import TaskSource, check_split
from argym.errors import ConfigError, EnvStateError
from argym.types import Message, Task

Action = str | Message


@dataclass
class Reply:
    """What an env answers to one assistant turn (returned by `TextEnv.respond`).

    `messages` are appended to the conversation after the assistant's turn;
    `reward_parts` are summed into the step's reward; `terminated`: the task is
    over; `truncated`: a limit of the env's own (time, a last turn it graded)
    ended the episode, as reaching `max_turns` does; `success` is the task's
    pass/fail; `infra_failure` marks a harness fault (never the candidate's).
    """

    messages: list[Message] = field(default_factory=list)
    reward_parts: dict[str, float] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    success: bool = False
    verdict: dict[str, Any] = field(default_factory=dict)
    infra_failure: bool = False


@dataclass
class EnvState:
    """A picklable, complete snapshot of an episode (see `TextEnv.snapshot`)."""

    env_class: str
    task: Task
    actions: list[Action]
    messages: list[Message]
    turn: int
    done: bool
    rng_state: dict[str, Any]
    wrappers: dict[str, Any] = field(default_factory=dict)


class TextEnv(gym.Env[list[Message], Action]):
    """Base class of argym's multi-turn text environments.

    `executors`: the worker pools and sandboxes the env grades with. The rollout
    engine hands in its own (shared by all its envs); without one the env builds
    its own, which `close()` releases. A subclass forwards the kwarg.

    `reset(seed=None, options=None) -> (obs, info)`:
        `obs` is the conversation so far (list of chat messages). Options:
        ``{"task_id": "..."}`` or ``{"task": Task}`` pins the task; otherwise it
        is drawn from the env's split with the env's RNG (one seed, one task).
        `info` holds ``task_id`` and ``split``.

    `step(action) -> (obs, reward, terminated, truncated, info)`:
        `action` is the assistant's turn, a string or an assistant message dict
        (``content`` plus optional OpenAI ``tool_calls``). `obs` is the whole
        conversation again, now ending with the env's reply; earlier messages
        are never rewritten. `reward` is a float, the sum of
        ``info["reward_parts"]``. `terminated` means the task is over (solved,
        or out of attempts); `truncated` means the env's `max_turns` was hit.
        `info` keys, deterministic for a seed and action sequence:
          - ``reward_parts``: every component summed into `reward`, by name;
          - ``verdict``: why (parsed answer, tests passed/failed, errors);
          - ``success``: the task's pass/fail, the metric evaluation uses;
          - ``infra_failure``: True only for harness faults;
          - ``turn``, ``task_id``.
        A malformed action is not an error: it yields an observation that says
        what was wrong and a reward of 0. `step` before `reset` or after the
        episode ended raises `argym.EnvStateError`.
    """

    metadata = {"render_modes": ["ansi", "human"]}

    def __init__(
        self,
        tasks: Any = None,
        split: str = "train",
        max_turns: int = 1,
        render_mode: str | None = None,
        executors: Executors | None = None,
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}."
            )
        if int(max_turns) < 1:
            raise ConfigError(f"max_turns must be at least 1, got {max_turns}.")
        self.render_mode = render_mode
        self.split = check_split(split)
        self.max_turns = int(max_turns)
        # the pools and sandboxes this env grades with: its rollout engine's, else its own (closed by close())
        self._owns_executors = executors is None
        self.executors = executors if executors is not None else Executors()
        self.tasks: TaskSource = self.load_tasks(tasks)
        self.observation_space = Conversation()
        self.action_space = UnicodeText()
        self._task: Task | None = None
        self._messages: list[Message] = []
        self._actions: list[Action] = []
        self._turn = 0
        self._done = True
        self._started = False

    # ---- hooks for subclasses -------------------------------------------------
    def load_tasks(self, tasks: Any) -> TaskSource:
        """Turn the `tasks=` kwarg (a name, a path, a source or a list) into a source."""
        raise NotImplementedError

    def respond(self, action: Message) -> Reply:
        """Grade one assistant turn and say what the env replies."""
        raise NotImplementedError

    def begin(self, task: Task) -> list[Message]:
        """Start an episode on `task`; returns the first messages. Reset per-episode state here."""
        return [m.copy() for m in task.prompt]

    def unreadable(self, problem: str) -> Reply:
        """The reply to an action that could not be read (`problem` says why): reward 0, and the
        problem as the next user message. The turn still counts, so `max_turns` truncates as usual."""
        return Reply(
            messages=[{"role": "user", "content": problem}],
            reward_parts={"outcome": 0.0},
            verdict={"error": problem},
        )

    def oracle_action(self) -> Action:
        """A correct action for the current state (scripted oracle agent, SFT warm start)."""
        raise NotImplementedError(f"{type(self).__name__} has no oracle.")

    def grader_versions(self) -> dict[str, str]:
        """The versions of the libraries that grade this env (part of a leaderboard's board key)."""
        return {}

    # ---- the contract --------------------------------------------------------
    @property
    def task(self) -> Task:
        if self._task is None:
            raise EnvStateError("No task yet: call reset() first.")
        return self._task

    @property
    def turn(self) -> int:
        return self._turn

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            task = options["task"]
            if not isinstance(task, Task):
                raise ConfigError(f"options['task'] must be an argym.Task, got {type(task).__name__}.")
        elif "task_id" in options:
            task = self.tasks.get(str(options["task_id"]))
        else:
            task = self.tasks.sample(self.np_random, self.split)
        self._task = task
        self._messages = list(self.begin(task))
        self._actions = []
        self._turn = 0
        self._done = False
        self._started = True
        return self._observation(), {"task_id": task.id, "split": task.split}

    def step(self, action: Action) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise EnvStateError("step() called before reset(): call env.reset() to start an episode.")
        if self._done:
            raise EnvStateError("step() called after the episode ended: call env.reset() to start a new one.")
        self._actions.append(copy.deepcopy(action))
        message, problem = parse_action(action)
        self._messages.append(message)
        reply = self.respond(message) if problem is None else self.unreadable(problem)
        self._messages.extend(reply.messages)
        self._turn += 1
        terminated = bool(reply.terminated)
        truncated = (not terminated) and (bool(reply.truncated) or self._turn >= self.max_turns)
        self._done = terminated or truncated
        reward = float(sum(reply.reward_parts.values()))
        info = {
            "reward_parts": dict(reply.reward_parts),
            "verdict": reply.verdict,
            "success": bool(reply.success),
            "infra_failure": bool(reply.infra_failure),
            "turn": self._turn,
            "task_id": self.task.id,
        }
        if self.render_mode == "human":
            print(self.render_turn())
        return self._observation(), reward, terminated, truncated, info

    def _observation(self) -> list[Message]:
        return [m.copy() for m in self._messages]

    # ---- snapshots -------------------------------------------------------------
    def snapshot(self) -> EnvState:
        """A picklable copy of the episode; `restore` it into any instance of this env."""
        if not self._started:
            raise EnvStateError("Nothing to snapshot: call reset() first.")
        return EnvState(
            env_class=f"{type(self).__module__}.{type(self).__qualname__}",
            task=self.task,
            actions=copy.deepcopy(self._actions),
            messages=self._observation(),
            turn=self._turn,
            done=self._done,
            rng_state=copy.deepcopy(dict(self.np_random.bit_generator.state)),
        )

    def restore(self, state: EnvState) -> None:
        """Bring this env to `state` by reset and replay, checking each observation.

        Envs whose steps have expensive or non-deterministic side effects override
        this: they check the state (`check_state`), rebuild their own part from a
        real copy (a workspace), then `load_episode(state)` for the base's part.
        """
        self.check_state(state)
        obs, _ = self.reset(options={"task": state.task})
        for action in state.actions:
            obs, *_ = self.step(action)
        if obs != state.messages[: len(obs)] or len(obs) != len(state.messages):
            raise EnvStateError(
                f"Replaying {len(state.actions)} actions did not reproduce the snapshot's conversation; "
                f"{type(self).__name__} is not deterministic, so it must override snapshot()/restore()."
            )
        self.load_episode(state)

    def check_state(self, state: EnvState, kind: type[EnvState] = EnvState) -> None:
        """Raise `ConfigError` unless `state` is a `kind` snapshot of this env's class."""
        me = f"{type(self).__module__}.{type(self).__qualname__}"
        if state.env_class != me or not isinstance(state, kind):
            raise ConfigError(
                f"Cannot restore a snapshot of {state.env_class} ({type(state).__name__}) into {me}: "
                f"restore a snapshot taken from a {type(self).__name__}."
            )

    def load_episode(self, state: EnvState) -> None:
        """Set the base's part of the episode (task, conversation, actions, turn, RNG) from `state`
        without replaying anything; a subclass's `restore` calls it once its own part is rebuilt."""
        self._task = state.task
        self._messages = [m.copy() for m in state.messages]
        self._actions = copy.deepcopy(state.actions)
        self._turn, self._done, self._started = state.turn, state.done, True
        self.np_random.bit_generator.state = copy.deepcopy(state.rng_state)

    # ---- rendering and lifetime -----------------------------------------------------
    def render_turn(self) -> str:
        return render_messages(self._messages[-2:] if self._turn else self._messages)

    def render(self) -> str | None:
        text = render_messages(self._messages)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Release what this env holds; subclasses release their own part first, then call this."""
        if self._owns_executors:
            self.executors.close()
        super().close()

    def __enter__(self) -> TextEnv:
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self.close()
        return False  # an exception in the block goes on


def parse_action(action: Any) -> tuple[Message, str | None]:
    """Normalise an action to an assistant message; the second item says what was wrong, if anything."""
    if isinstance(action, str):
        return {"role": "assistant", "content": action}, None
    if isinstance(action, dict):
        content = action.get("content")
        if content is None:
            content = ""
        role = action.get("role", "assistant")
        if role != "assistant":
            return {"role": "assistant", "content": ""}, (
                f"Your turn must be an assistant message; got a message with role {role!r}."
            )
        if not isinstance(content, str):
            return {"role": "assistant", "content": ""}, (
                f"An assistant message's content must be a string; got {type(content).__name__}."
            )
        msg: Message = {"role": "assistant", "content": content}
        if action.get("tool_calls"):
            msg["tool_calls"] = copy.deepcopy(action["tool_calls"])
        return msg, None
    return {"role": "assistant", "content": ""}, (
        f"Your turn could not be read: expected a string or an assistant message dict, "
        f"got {type(action).__name__}."
    )


def render_messages(messages: list[Message]) -> str:
    """Plain-text rendering of a conversation, for `render()` and `argym play`."""
    parts = []
    for m in messages:
        head = f"[{m.get('role', '?')}]"
        body = m.get("content", "") or ""
        if m.get("tool_calls"):
            body += f"\n(tool calls: {m['tool_calls']})"
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts)
