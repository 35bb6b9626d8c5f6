"""`argym/Code-v0`: write a Python function, graded by hidden tests in a sandbox.

The agent sees a function stub (signature and docstring) and answers with one
```python code block (the last block counts; with no fence the whole reply is
read as code) holding either the complete function or only its body, which
then continues the stub as in HumanEval. The hidden tests (``check(candidate)``)
run in a sandbox (`argym.envs.sandbox`) in a process the candidate cannot
touch. The task's asserts are counted from the test source (every ``assert``
whose condition is not a constant; one in a loop must hold on every
iteration), so the count does not depend on how far the candidate got.
Reward 1 if every assert passes, else 0 (``partial_credit=True``: passed /
the task's asserts, an assert that never ran, because the candidate exited or
crashed first, counting as not passed); ``info["success"]`` is the all-pass.
A timeout, a memory or output kill is the candidate's failure; only a sandbox
that cannot run, or a test harness that fails before the program runs, is an
infrastructure failure.

With ``max_attempts > 1`` a failed attempt is answered and the agent revises.
What the answer says is ``feedback``:

- ``"summary"`` (default): the failure kind, how many hidden tests did not
  pass and what failed first (``AssertionError``, a builtin exception's name, a
  timeout), never a test's line, input or expected value;
- ``"full"``: the failing assert as written, with its expected value, and a
  bounded traceback.

``"full"`` helps a model debug, but each attempt then shows one hidden test
with its answer, so under RL a policy can learn to hard-code the test it was
shown and pass on the next attempt without solving the task: use it for
evaluation of agents that revise, not for training. ``"summary"`` still leaks
a few bits per attempt (counts, an exception name); see docs/code_grading.md.

Tasks (``tasks=``, see `argym.envs.code.tasks`): ``"humaneval"`` (default, 164
problems, split test), ``"functions(test_size=40)"`` (procedural, train and
test), or a JSONL of ``{prompt, tests, entry_point}`` rows.

Example::

    env = argym.make("argym/Code-v0", max_attempts=2)
    obs, info = env.reset(options={"task_id": "HumanEval/0"}, )
    obs, reward, terminated, truncated, info = env.step("```python\\n    return False\\n```")
    # reward 0.0, terminated False; obs[-1]["content"] starts "A hidden test failed. 4 of 7 hidden tests did
    # not pass; first failure: AssertionError (a wrong result)."
    # info["verdict"] == {"kind": "wrong_answer", "passed": 3, "failed": 4, "total": 7, "output": "",
    #                     "message": "line 10: assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"}
"""

from __future__ import annotations

from typing import Any

from argym.envs.base import Action, Reply, TextEnv
from argym.envs.code.grader import FEEDBACK_MODES, feedback, grade
from argym.envs.code.tasks import code_tasks
from argym.envs.sandbox.base import Sandbox, SandboxName
from argym.envs.tasks import TaskSource
from argym.errors import ConfigError, InfrastructureError
from argym.types import Message, Task


class CodeEnv(TextEnv):
    """One function to write; ``max_attempts`` answers; graded by hidden tests.

    `info["verdict"]`: ``{"kind", "passed", "failed", "total", "message", "output"}`` (passed and
    failed count the task's asserts, of ``total``; the message holds the test's text); kind is
    one of `argym.envs.code.grader.KINDS` (ok, wrong_answer, exception, timeout,
    memory, output_limit, syntax_error, crash, exit, no_code, test_error, no_verdict)
    or infra_failure. `sandbox` is a backend name (``process``, ``process-weak``,
    ``docker``) or a `Sandbox`; an `executors.sandbox` handed in by the rollout
    engine wins over the name. `timeout_s` bounds one attempt's tests. `feedback`: ``"summary"`` or
    ``"full"`` (module docstring).
    """

    metadata = {**TextEnv.metadata, "argym.exploits": "code"}  # `argym check` runs this corpus family

    def __init__(
        self,
        tasks: Any = "humaneval",
        split: str = "test",
        max_attempts: int = 1,
        partial_credit: bool = False,
        timeout_s: float = 5.0,
        sandbox: SandboxName | Sandbox = "process",
        feedback: str = "summary",
        render_mode: str | None = None,
        executors: Any = None,
    ):
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ConfigError(f"max_attempts must be an integer >= 1, got {max_attempts!r}.")
        if not timeout_s or float(timeout_s) <= 0:
            raise ConfigError(f"timeout_s must be positive, got {timeout_s!r}.")
        if feedback not in FEEDBACK_MODES:
            raise ConfigError(
                f"feedback must be one of {', '.join(map(repr, FEEDBACK_MODES))}, got {feedback!r}: "
                f"'summary' (default) hides the hidden tests' expected values, 'full' quotes them."
            )
        self.feedback = feedback
        self.max_attempts = max_attempts
        self.partial_credit = bool(partial_credit)
        self.timeout_s = float(timeout_s)
        self._sandbox_spec = sandbox
        self._graded_in: Sandbox | None = None
        super().__init__(
            tasks=tasks, split=split, max_turns=max_attempts, render_mode=render_mode, executors=executors
        )

    @property
    def sandbox(self) -> Sandbox:
        """The executors' sandbox (the engine's if it handed one in, else this env's own) of the named backend."""
        return self.executors.sandbox_for(self._sandbox_spec)

    def load_tasks(self, tasks: Any) -> TaskSource:
        return code_tasks(tasks)

    def begin(self, task: Task) -> list[Message]:
        if not task.tests or "entry_point" not in task.meta:
            raise ConfigError(f"Code task {task.id!r} needs tests and meta['entry_point'].")
        return super().begin(task)

    def close(self) -> None:
        """Also stop the zygotes this env's grading left started in its (maybe shared) sandbox: an idle
        cache, which the next grade in that sandbox starts again."""
        if self._graded_in is not None:
            self._graded_in.cool()
        super().close()

    def respond(self, action: Message) -> Reply:
        try:
            self._graded_in = self.sandbox
            verdict = grade(self._graded_in, self.task, action.get("content") or "", self.timeout_s)
        except InfrastructureError as e:
            return Reply(
                reward_parts={"outcome": 0.0},
                terminated=True,
                infra_failure=True,
                verdict={
                    "kind": "infra_failure",
                    "passed": 0,
                    "failed": 0,
                    "total": 0,
                    "message": str(e),
                    "output": "",
                },
            )
        total = verdict["total"]
        success = verdict["kind"] == "ok" and total > 0 and verdict["passed"] == total
        reward = 1.0 if success else (verdict["passed"] / total if self.partial_credit and total else 0.0)
        if success or self.turn + 1 >= self.max_attempts:
            return Reply(reward_parts={"outcome": reward}, terminated=True, success=success, verdict=verdict)
        return Reply(
            messages=[{"role": "user", "content": feedback(verdict, self.feedback)}],
            reward_parts={"outcome": 0.0},
            verdict=verdict,
        )

    def step(self, action: Action):
        # The turn limit is the attempt limit, which ends the task (as in Math-v0).
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, False, info

    def grader_versions(self) -> dict[str, str]:
        """The test harness (a hash of its source) and the sandbox backend decide the verdicts."""
        import hashlib

        from argym.envs.code.grader import harness_source

        backend = self._sandbox_spec if isinstance(self._sandbox_spec, str) else self._sandbox_spec.backend
        return {
            "argym-code-harness": hashlib.sha256(harness_source().encode()).hexdigest()[:12],
            "sandbox": str(backend),
        }

    def oracle_action(self) -> str:
        if self.task.answer is None:
            raise ConfigError(f"Code task {self.task.id!r} has no reference solution for the oracle.")
        return f"```python\n{self.task.answer.rstrip()}\n```"
