"""`argym/Math-v0`: answer a math question in ``\\boxed{}``, graded by math-verify or the task's own scorer.

``answer_format="boxed"`` (the default) grades the last ``\\boxed{}``; ``"final"`` grades the
reply's last mathematical expression as math-verify extracts it from unboxed text (for a
model that answers without the box), and the verdict says whether the reply was ``boxed``,
so a recipe can reward the format apart (the `format` reward component).

With ``max_attempts > 1`` a wrong answer gets a short "try again" and the
agent answers again; the episode ends at the first correct answer or when the
attempts run out. Tasks (``tasks=``):
- ``"arithmetic(digits=2,ops=+-,terms=3)"``: argym's own generator (default);
- ``"word_problems(max_number=12)"``: multi-step word problems whose intermediate
  quantities are known (`meta["steps"]`, as arithmetic's sub-expressions);
- ``"reasoning_gym/NAME(key=value,...)"``: any reasoning-gym dataset, graded by the
  dataset's own ``score_answer`` (its score in [0, 1] is the reward; see
  `argym.envs.math.reasoning_gym` for where argym differs from reasoning-gym's evaluation);
- a path to a JSONL file of ``{"question", "answer"}`` rows, with optional
  ``id`` (default ``<file stem>#<line>``), ``split`` (default: by hash of the id) and
  ``rephrasings`` (questions with the same answer, for Co-rewarding-I: argym.envs.rephrase);
- a `TaskSource`, or a list of `Task`.

Example::

    env = argym.make("argym/Math-v0", tasks="arithmetic(digits=2)", max_attempts=2)
    obs, info = env.reset(seed=0)   # [{"role": "user", "content": "What is 75 + 54? Put ..."}]
    obs, reward, terminated, truncated, info = env.step("\\\\boxed{47}")
    # reward 0.0, terminated False, obs[-1]["content"] == "Incorrect, try again. Put ..."
    # info["verdict"] == {"parsed": "47", "correct": False, "reason": "mismatch"}
    obs, reward, terminated, truncated, info = env.step("\\\\boxed{129}")
    # reward 1.0, terminated True, info["success"] True, info["reward_parts"] == {"outcome": 1.0}
"""

from __future__ import annotations

from typing import Any

from argym.envs.base import Reply, TextEnv
from argym.envs.executors import Executors
from argym.envs.math.answer import BOXED_INSTRUCTION
from argym.envs.math.arithmetic import arithmetic_source
from argym.envs.math.reasoning_gym import is_reasoning_gym, reasoning_gym_source, reasoning_gym_version
from argym.envs.math.verifier import ANSWER_FORMATS, RULES_VERSION, MathVerifier
from argym.envs.math.word_problems import word_problem_source
from argym.envs.task_specs import SourceFactory, resolve_source
from argym.envs.tasks import TaskSource
from argym.errors import ConfigError, InfrastructureError
from argym.registry import Registry
from argym.types import Message, Task

RETRY_MESSAGE = f"Incorrect, try again. {BOXED_INSTRUCTION}"


class MathEnv(TextEnv):
    """One math question; ``max_attempts`` answers; reward 1 for a verified answer, else 0 (a task with its
    own scorer: the score of the last attempt, 1 being a success).

    `info["verdict"]` is ``{"parsed": str | None, "correct": bool, "reason": str}``
    with reason one of no_boxed_answer, answer_too_long, timeout, verified,
    mismatch (or infra_failure, with an ``error`` text, when the grader itself
    failed: `info["infra_failure"]` is then True and the episode ends), and a
    ``score`` for a task graded by its own scorer. With ``answer_format="final"``
    no_boxed_answer is no_answer and the verdict has ``boxed`` (bool).
    """

    def __init__(
        self,
        tasks: Any = "arithmetic",
        split: str = "train",
        max_attempts: int = 1,
        render_mode: str | None = None,
        executors: Executors | None = None,
        answer_format: str = "boxed",
    ):
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be an integer >= 1, got {max_attempts!r}.")
        if answer_format not in ANSWER_FORMATS:
            raise ConfigError(
                f"answer_format must be one of {', '.join(ANSWER_FORMATS)}, got {answer_format!r}."
            )
        self.max_attempts = max_attempts
        self.answer_format = answer_format
        self._verifier: MathVerifier | None = None
        super().__init__(
            tasks=tasks, split=split, max_turns=max_attempts, render_mode=render_mode, executors=executors
        )
        if answer_format != "boxed" and is_reasoning_gym(self.tasks):
            raise ConfigError(
                f"answer_format={answer_format!r} grades with math-verify, but reasoning-gym tasks are "
                f"scored by their dataset's own scorer on the boxed answer; use answer_format='boxed'."
            )

    @property
    def verifier(self) -> MathVerifier:
        """Grades through the executors' verifier pool: the engine's (shared by its envs), else this env's own."""
        if self._verifier is None:
            self._verifier = MathVerifier(self.executors.verifier)
        return self._verifier

    def load_tasks(self, tasks: Any) -> TaskSource:
        return math_tasks(tasks)

    def begin(self, task: Task) -> list[Message]:
        if task.answer is None:
            raise ConfigError(f"Math task {task.id!r} has no answer to grade against.")
        return super().begin(task)

    def respond(self, action: Message) -> Reply:
        try:
            verdict: dict[str, Any] = dict(
                self.verifier.check(
                    self.task.answer or "",
                    action.get("content") or "",
                    scorer=self.task.meta.get("scorer"),
                    answer_format=self.answer_format,
                )
            )
        except InfrastructureError as e:
            return Reply(
                reward_parts={"outcome": 0.0},
                terminated=True,
                infra_failure=True,
                verdict={"parsed": None, "correct": False, "reason": "infra_failure", "error": str(e)},
            )
        if verdict["correct"]:
            return Reply(reward_parts={"outcome": 1.0}, terminated=True, success=True, verdict=verdict)
        if self.turn + 1 >= self.max_attempts:  # out of attempts: the task is over, not truncated
            return Reply(
                reward_parts={"outcome": float(verdict.get("score", 0.0))}, terminated=True, verdict=verdict
            )
        return Reply(
            messages=[{"role": "user", "content": RETRY_MESSAGE}],
            reward_parts={"outcome": 0.0},
            verdict=verdict,
        )

    def unreadable(self, problem: str) -> Reply:
        """The turn limit is the attempt limit, which ends the task: an unreadable last attempt terminates."""
        reply = super().unreadable(problem)
        reply.terminated = self.turn + 1 >= self.max_attempts
        return reply

    def grader_versions(self) -> dict[str, str]:
        """What decides the score is part of the board key: reasoning-gym's scorers for its tasks, else
        math-verify and the rules argym adds to it (`verifier.RULES_VERSION`)."""
        from importlib.metadata import PackageNotFoundError, version

        if is_reasoning_gym(self.tasks):
            return {"reasoning-gym": reasoning_gym_version()}
        try:
            mv = version("math-verify")
        except PackageNotFoundError:
            mv = "unknown"
        return {"math-verify": mv, "argym-math-rules": RULES_VERSION}

    def oracle_action(self) -> str:
        return f"\\boxed{{{self.task.answer}}}"


MATH_SOURCES: Registry[SourceFactory] = Registry("math task source")
"""The named specs of ``tasks=``: source name → factory; `@MATH_SOURCES.register("mine")` adds one."""
MATH_SOURCES.add("arithmetic", arithmetic_source)
MATH_SOURCES.add("word_problems", word_problem_source)
MATH_SOURCES.add(
    "reasoning_gym", reasoning_gym_source
)  # reasoning_gym/NAME: the dataset is the first argument


def math_tasks(tasks: Any) -> TaskSource:
    """The `tasks=` kwarg of `MathEnv` as a task source (see the module docstring)."""
    return resolve_source(tasks, row_to_task=_jsonl_task, named=MATH_SOURCES, kind="math")


def _jsonl_task(row: dict[str, Any], default_id: str) -> Task:
    """One JSONL row ``{"question", "answer", "id"?, "split"?}`` as a task (`read_jsonl` adds the split)."""
    question, answer = row.get("question"), row.get("answer")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("each row needs a non-empty string 'question'")
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or not str(answer).strip():
        raise ValueError("each row needs an 'answer' (a non-empty string or a number)")
    content = question if "\\boxed" in question else f"{question}\n{BOXED_INSTRUCTION}"
    rephrasings = row.get("rephrasings", [])  # Co-rewarding-I's second views (argym.envs.rephrase)
    rephrasings = [rephrasings] if isinstance(rephrasings, str) else rephrasings
    if not isinstance(rephrasings, list) or not all(isinstance(r, str) and r.strip() for r in rephrasings):
        raise ValueError("'rephrasings', where given, must be a non-empty string or a list of them")
    return Task(
        id=str(row.get("id", default_id)),
        prompt=({"role": "user", "content": content},),
        answer=str(answer).strip(),
        meta={"rephrasings": tuple(r if "\\boxed" in r else f"{r}\n{BOXED_INSTRUCTION}" for r in rephrasings)}
        if rephrasings
        else {},
    )
