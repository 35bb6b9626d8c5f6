"""An agent program argym can train unchanged: an ordinary loop over the official OpenAI client.

    argym train configs/grpo_program.yaml agent.program=examples/agent_program.py:solve
    argym eval argym/ToolCall-v0 --agent program:examples/agent_program.py:solve@tiny:runs/grpo_program

`task.prompt` is the env's first observation, `client` is pointed at argym's endpoint (the policy being
trained, or the agent after @ in eval), `tools.schemas` are the task's tools and `tools.run(message)`
executes a reply's tool calls in the env. The returned text is the env's final answer (its reward).
"""


def solve(task, client, tools, max_turns: int = 6) -> str:
    messages = [dict(m) for m in task.prompt]
    for _ in range(max_turns):
        reply = (
            client.chat.completions.create(model="argym", messages=messages, tools=tools.schemas or None)
            .choices[0]
            .message
        )
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            return reply.content or ""
        messages += tools.run(reply)  # the env runs the calls and answers with tool messages
    return ""
