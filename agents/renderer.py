"""Messages ↔ tokens, on the agent side, token-exact across turns.

The env speaks messages; a policy speaks token ids. `ChatRenderer` owns the
mapping through the tokenizer's chat template:
- the first prompt is the template applied to the task's messages;
- after a turn, the policy's generated ids are kept as they are (never
  re-tokenized) and only the env's new messages are rendered and appended.

To render "what comes after an assistant turn" independently of how a
template re-renders earlier turns (Qwen3's drops old `<think>` blocks, for
example), the renderer applies the template to a stand-in conversation
``[user, assistant(MARK), *new_messages]`` and keeps the text after MARK's
end-of-turn string. That text is the env's part (loss mask 0).

Tools: a template with its own tool support (it reads ``tool_calls``, as
Qwen's do) gets ``tools=`` and renders calls itself. A template without it
(ChatML as in SmolLM2 and the tiny model) gets argym's fallback: an assistant
message's ``tool_calls`` are written into its text as Hermes
``<tool_call>{...}</tool_call>`` blocks (a form every argym env reads), and
``tool`` messages are rendered by the template like any other role; the
env's system message already lists the tools' schemas.
"""

from __future__ import annotations

import json
from typing import Any

from argym.envs.tools.calls import format_calls, parse_tool_calls
from argym.errors import ConfigError
from argym.types import Message

_MARK = "ARGYM_ASSISTANT_TURN_MARK"


class ChatRenderer:
    """Renders conversations for one tokenizer; knows its end-of-turn token."""

    def __init__(self, tokenizer: Any):
        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError(
                "The tokenizer has no chat template; set tokenizer.chat_template before rendering."
            )
        self.tokenizer = tokenizer
        self.eos_text, self.eos_id = _end_of_turn(tokenizer)
        # the template renders `tool_calls` itself; otherwise argym's fallback writes them as text
        self.native_tools = "tool_calls" in str(tokenizer.chat_template)

    def _template(self, messages: list[Message], tools: Any, add_generation_prompt: bool) -> str:
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
        if tools:
            kwargs["tools"] = list(tools)
        messages = [
            _with_calls_in_text(m) if not self.native_tools else with_object_arguments(m) for m in messages
        ]
        text: str = self.tokenizer.apply_chat_template(list(messages), **kwargs)
        return text

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: list[Message], tools: Any = None) -> list[int]:
        """Token ids of the first prompt, ending with the generation prompt."""
        return self.encode(self._template(messages, tools, add_generation_prompt=True))

    def continuation_ids(
        self, new_messages: list[Message], tools: Any = None, turn_ended: bool = True
    ) -> list[int]:
        """Ids that follow a finished assistant turn: the env's messages, then the next generation prompt.

        `turn_ended` is False when the policy stopped without its end-of-turn
        token (length limit); the end-of-turn token is then part of this env text.
        """
        stand_in: list[Message] = [{"role": "user", "content": "u"}, {"role": "assistant", "content": _MARK}]
        full = self._template(stand_in + list(new_messages), tools, add_generation_prompt=True)
        anchor = full.find(_MARK + self.eos_text)
        if anchor < 0:
            raise ConfigError(
                "The chat template does not end an assistant turn with the tokenizer's "
                f"end-of-turn text {self.eos_text!r}; argym cannot append env messages token-exactly."
            )
        after = full[anchor + len(_MARK) + len(self.eos_text) :]
        ids = self.encode(after)
        return ids if turn_ended else [self.eos_id, *ids]

    def assistant_ids(self, message: Message, tools: Any = None) -> list[int]:
        """Ids a policy would generate for `message` (content + end-of-turn); used to train on scripted turns.

        A message with ``tool_calls`` is written as the model would write it: by
        the template where it renders calls itself, else as Hermes tags in the text.
        """
        if not message.get("tool_calls"):
            return self.encode(message.get("content", "") or "") + [self.eos_id]
        if not self.native_tools:
            return self.encode(_with_calls_in_text(message)["content"]) + [self.eos_id]
        user: list[Message] = [{"role": "user", "content": "u"}]
        before = self._template(user, tools, add_generation_prompt=True)
        full = self._template(user + [message], tools, add_generation_prompt=False)
        end = full.rfind(self.eos_text)
        if not full.startswith(before) or end < len(before):
            raise ConfigError(
                "The chat template renders an assistant turn with tool calls in a way argym cannot "
                "split off token-exactly (it does not extend the generation prompt)."
            )
        return self.encode(full[len(before) : end]) + [self.eos_id]

    def decode(self, ids: list[int]) -> str:
        text: str = self.tokenizer.decode(ids, skip_special_tokens=False)
        return text


def _end_of_turn(tokenizer: Any) -> tuple[str, int]:
    """The text and id that close an assistant turn: ChatML's `<|im_end|>` where present, else EOS."""
    for text in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>"):
        tid = tokenizer.convert_tokens_to_ids(text)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid is not None:
            return text, tid
    if tokenizer.eos_token is None:
        raise ConfigError("The tokenizer has neither a ChatML end-of-turn token nor an EOS token.")
    return tokenizer.eos_token, tokenizer.eos_token_id


def _with_calls_in_text(message: Message) -> Message:
    """argym's fallback for templates without tool support: an assistant's `tool_calls` as Hermes tags in its text."""
    if message.get("role") != "assistant" or not message.get("tool_calls"):
        return message
    turn = parse_tool_calls(message)
    text = format_calls(turn.calls, "hermes", text=message.get("content") or "")
    return {"role": "assistant", "content": str(text)}


def with_object_arguments(message: Message) -> Message:
    """An assistant's `tool_calls` with each call's arguments as an object, not OpenAI's JSON string: Hugging
    Face chat templates take them so (Qwen2.5's writes ``arguments | tojson``; given a string it writes
    ``"arguments": "{\\"a\\": 1}"``, which SFT on oracle turns would teach; newer templates fail on a string).
    Arguments that are not a JSON object are left as they are (the call is then the env's to refuse)."""
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not calls:
        return message
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        if isinstance(fn, dict) and isinstance(args, str):
            try:
                parsed = json.loads(args)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                call = {**call, "function": {**fn, "arguments": parsed}}
        out.append(call)
    return {**message, "tool_calls": out}


def conversation_ids(
    renderer: ChatRenderer, messages: list[Message], tools: Any = None
) -> tuple[list[int], list[int]]:
    """Ids and loss mask of a finished conversation, laid out exactly as a rollout would be.

    Used to train on scripted (oracle) trajectories: assistant turns become
    policy tokens (content + end-of-turn, mask 1), everything else is rendered
    as the rollout engine renders env replies (mask 0).
    """
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if not turns:
        raise ConfigError("The conversation has no assistant turn to train on.")
    ids = renderer.prompt_ids(messages[: turns[0]], tools=tools)
    mask = [0] * len(ids)
    for k, i in enumerate(turns):
        own = renderer.assistant_ids(messages[i], tools=tools)
        ids += own
        mask += [1] * len(own)
        if k + 1 < len(turns):
            more = renderer.continuation_ids(messages[i + 1 : turns[k + 1]], tools=tools)
            ids += more
            mask += [0] * len(more)
    return ids, mask
