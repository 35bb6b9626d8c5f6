"""A small verifiers taskset shipped with argym: `argym/Verifiers-v0`'s default (``env="argym-verifiers-demo"``).

Two-digit additions written with verifiers' own classes, so ``gym.make("argym/Verifiers-v0")`` runs with
no other package and shows what a taskset package holds: a `vf.TaskData` row type, a `vf.Task` with a
weighted ``@vf.reward`` and a zero-weight one, a ``@vf.metric``, and a `vf.Taskset` exported in ``__all__``.
verifiers' loader imports a taskset by its id's module name, so `register` makes this module importable
under ``argym_verifiers_demo``.
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Iterator

import verifiers.v1 as vf

ID = "argym-verifiers-demo"
_NUMBER = re.compile(r"-?\d+")


class AddData(vf.TaskData):
    answer: str


class AddTask(vf.Task[AddData]):
    @vf.reward(weight=1.0)
    async def correct(self, task: AddData, trace: vf.Trace) -> float:
        """1 when the reply's last number is the sum."""
        numbers = _NUMBER.findall(trace.last_reply)
        return float(bool(numbers) and numbers[-1] == task.answer)

    @vf.reward(weight=0.0)
    async def number_only(self, trace: vf.Trace) -> float:
        """Logged, not trained on: the reply is the number alone."""
        return float(bool(re.fullmatch(r"\s*-?\d+\s*", trace.last_reply)))

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class AddConfig(vf.TasksetConfig):
    size: int = 200
    """How many tasks."""
    seed: int = 0


class AddTaskset(vf.Taskset[AddTask, AddConfig]):
    def load(self) -> Iterator[AddTask]:
        rng = random.Random(self.config.seed)
        for i in range(self.config.size):
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            yield AddTask(
                AddData(
                    id=f"add-{i}",
                    prompt=f"What is {a} + {b}?",
                    answer=str(a + b),
                    system_prompt="Reply with the number only.",
                ),
                self.config.task,
            )


def register() -> None:
    """Make this module importable under the module name verifiers' loader derives from `ID`."""
    sys.modules.setdefault(ID.replace("-", "_"), sys.modules[__name__])


__all__ = ["AddTaskset"]
