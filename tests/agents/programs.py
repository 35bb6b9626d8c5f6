"""Agent programs the endpoint tests run (loaded by path, as `agent.program=FILE.py:FUNCTION`)."""

from __future__ import annotations

import time


def solve_twice(task, client, tools):
    """Two turns over the official client: a tool round trip where the policy called one, else a nudge."""
    messages = [dict(m) for m in task.prompt]
    reply = (
        client.chat.completions.create(
            model="argym", messages=messages, tools=tools.schemas or None, max_tokens=8
        )
        .choices[0]
        .message
    )
    messages.append(reply.model_dump(exclude_none=True))
    messages += (
        tools.run(reply) if reply.tool_calls else [{"role": "user", "content": f"Use a tool. ({task.id})"}]
    )
    reply = (
        client.chat.completions.create(
            model="argym", messages=messages, tools=tools.schemas or None, max_tokens=8
        )
        .choices[0]
        .message
    )
    return reply.content


def hang(task, client, tools):
    """Calls the endpoint once, then never returns in time."""
    client.chat.completions.create(model="argym", messages=list(task.prompt), max_tokens=4)
    time.sleep(60)


def never_calls(task, client, tools):
    return "42"


def crash(task, client, tools):
    client.chat.completions.create(model="argym", messages=list(task.prompt), max_tokens=4)
    raise ValueError("the program could not read the reply")


def answer_length(task, answer):
    """A user-named reward (`agent.reward`): the untrained tiny policy's answers vary in length, so groups do."""
    return len(answer or "") / 8
