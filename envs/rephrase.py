"""Rephrasings that keep a task's answer: the second view of Co-rewarding-I (arXiv 2508.00410 §3.2).

A task declares how it rephrases by carrying ``meta["rephrasings"]``: question texts (the whole user
message, answer instruction included) whose answer is the task's own. Math's generators write one
(`arithmetic`: the expression reworded and, where every operator is + or every one is *, its terms
reversed; `word_problems`: a second telling of each story), and a Math JSONL row may carry a
``rephrasings`` column (a string or a list of strings). The paper rephrases with an LLM; argym's
generators know their answers, so theirs are exact by construction.

`rephrased(task)` is the task asking its first rephrasing, with the id ``<id>~rephrased``, so the
reward stage pairs a question's group with its rephrasing's by id (`partner_id`). A task without
rephrasings is a `ConfigError`, never a silent fallback to the task itself.
"""

from __future__ import annotations

from dataclasses import replace

from argym.errors import ConfigError
from argym.types import Task

REPHRASED = "~rephrased"
"""Suffix of a rephrased task's id."""


def rephrasings(task: Task) -> tuple[str, ...]:
    """The task's declared rephrasings (empty if it declares none)."""
    found = task.meta.get("rephrasings") or ()
    return (found,) if isinstance(found, str) else tuple(str(r) for r in found)


def rephrased(task: Task) -> Task:
    """`task` asked in its first rephrasing: same answer and meta, the last user message replaced."""
    texts = rephrasings(task)
    if not texts:
        raise ConfigError(
            f"Task {task.id!r} declares no rephrasing (meta['rephrasings']), and Co-rewarding-I needs one per "
            "task. Use a source that writes them (Math's arithmetic or word_problems), or give a JSONL file a "
            "'rephrasings' column."
        )
    last = max(i for i, m in enumerate(task.prompt) if m.get("role") == "user")
    prompt = list(task.prompt)
    prompt[last] = {**prompt[last], "content": texts[0]}
    return replace(task, id=task.id + REPHRASED, prompt=tuple(prompt))


def base_id(task_id: str) -> str:
    """The id of the task a (possibly rephrased) task id asks."""
    return task_id.removesuffix(REPHRASED)


def partner_id(task_id: str) -> str:
    """The id of the other view: a task's rephrasing, or a rephrasing's original."""
    return base_id(task_id) if task_id.endswith(REPHRASED) else task_id + REPHRASED
