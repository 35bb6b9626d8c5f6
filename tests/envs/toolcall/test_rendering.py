"""Tool calls on the agent side: a template with its own tool support renders them itself; a ChatML template without
it (the tiny model's, SmolLM2's) gets argym's fallback, Hermes tags in the text that the env reads back."""

from __future__ import annotations

import json

from argym.agents.renderer import ChatRenderer, conversation_ids, with_object_arguments
from argym.agents.tiny import build_tiny_tokenizer
from argym.envs.tools.calls import parse_tool_calls

# The tool parts of Qwen2.5's template, in its layout: tools in the system turn, calls as <tool_call> JSON in
# the assistant turn, tool results as <tool_response> in a user turn.
QWEN_TOOLS = (
    "{%- if tools -%}{{ '<|im_start|>system\n# Tools\n<tools>' }}{%- for t in tools -%}{{ '\n' + (t | tojson) }}"
    "{%- endfor -%}{{ '\n</tools><|im_end|>\n' }}{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'assistant' -%}{{ '<|im_start|>assistant\n' + (m['content'] or '') }}"
    "{%- for c in m.get('tool_calls') or [] -%}"
    "{{ '\n<tool_call>\n{\"name\": \"' + c['function']['name'] + '\", \"arguments\": ' + (c['function']['arguments'] | tojson) + '}\n</tool_call>' }}"
    "{%- endfor -%}{{ '<|im_end|>\n' }}"
    "{%- elif m['role'] == 'tool' -%}{{ '<|im_start|>user\n<tool_response>\n' + m['content'] + '\n</tool_response><|im_end|>\n' }}"
    "{%- else -%}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)
TOOLS = [
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
]
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 2})},
        }
    ],
}
CONVERSATION = [
    {"role": "user", "content": "1+2?"},
    CALL,
    {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "3"},
    {"role": "assistant", "content": "3"},
]


def test_fallback_writes_calls_as_hermes_tags_the_env_reads_back():
    tok = build_tiny_tokenizer()
    renderer = ChatRenderer(tok)
    assert not renderer.native_tools
    ids = renderer.assistant_ids(CALL, tools=TOOLS)
    text = tok.decode(ids[:-1])
    assert ids[-1] == renderer.eos_id and "<tool_call>" in text
    turn = parse_tool_calls(text)
    assert turn.ok and [(c.name, c.arguments) for c in turn.calls] == [("add", {"a": 1, "b": 2})]
    ids, mask = conversation_ids(renderer, CONVERSATION, tools=TOOLS)
    policy = tok.decode([i for i, m in zip(ids, mask) if m])
    env = tok.decode([i for i, m in zip(ids, mask) if not m])
    assert (
        "<tool_call>" in policy
        and "<|im_start|>tool\n3<|im_end|>" in env
        and "tool" not in policy.replace("tool_call", "")
    )


def test_native_template_renders_its_own_tools_and_calls():
    tok = build_tiny_tokenizer()
    tok.chat_template = QWEN_TOOLS
    renderer = ChatRenderer(tok)
    assert renderer.native_tools
    prompt = tok.decode(renderer.prompt_ids(CONVERSATION[:1], tools=TOOLS))
    assert prompt.startswith("<|im_start|>system\n# Tools\n<tools>") and '"name": "add"' in prompt
    ids, mask = conversation_ids(renderer, CONVERSATION, tools=TOOLS)
    as_hf = [
        with_object_arguments(m) for m in CONVERSATION
    ]  # Hugging Face's convention: arguments as an object
    full = tok.apply_chat_template(as_hf, tools=TOOLS, tokenize=False)
    assert tok.decode(ids) == full.rstrip(
        "\n"
    )  # token-exact with the template rendering the whole conversation
    policy = tok.decode([i for i, m in zip(ids, mask) if m])
    assert (
        policy
        == '\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call><|im_end|>3<|im_end|>'
    )
    assert "<tool_response>" not in policy
