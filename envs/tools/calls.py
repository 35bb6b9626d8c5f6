"""Tool calls: read them from an assistant turn, check them against a tool's schema, write them back.

Every env with tools (ToolCall, SWE) reads the agent's turn through this one
module, so the same call forms work everywhere and envs stay model-agnostic.
The supported forms:

- an assistant message dict with OpenAI ``tool_calls`` (what an HTTP endpoint
  returns): ``{"role": "assistant", "content": "...", "tool_calls": [{"id": "c1",
  "type": "function", "function": {"name": "add", "arguments": "{\\"a\\": 1}"}}]}``
  (``arguments`` a JSON string, or already a dict);
- OpenAI-style JSON as the whole text: ``{"name": "add", "arguments": {"a": 1}}``,
  a list of such objects, or several objects one after another, optionally in
  one ```json fenced block (``parameters`` is read as ``arguments``);
- Hermes / Qwen tags anywhere in the text: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``,
  one or several; the text outside the tags is the turn's text.

A text that is none of these is a final answer (`ParsedTurn.calls` empty).

Interface (stable; SWE-v0 imports it):
    parse_tool_calls(action, limits=CallLimits()) -> ParsedTurn
    validate_arguments(arguments, parameters_schema) -> list[str]
    check_call(call, tools) -> str | None      # unknown tool, or the argument errors, as one message
    tool_message(call, content) -> Message     # a `tool` reply to a call
    format_calls(calls, style, text="") -> str | Message   # write calls in one of the forms above

Everything is bounded (`CallLimits`): 10,000 calls, arguments nested
thousands deep, a 1 MB argument string, or a huge turn give an error string,
never an exception or unbounded work.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from argym.types import Message

STYLES = ("openai", "json", "hermes")
_TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?[ \t]*\n(.*)\n```$", re.DOTALL)


@dataclass(frozen=True)
class CallLimits:
    """Bounds on what one turn may ask for; past any of them the turn is an error, not work."""

    max_calls: int = 32
    """Most calls one turn may make."""
    max_depth: int = 16
    """Deepest nesting of lists/objects inside one call's arguments."""
    max_argument_chars: int = 100_000
    """Longest JSON text of one call's arguments (a 1 MB argument string is over it)."""
    max_turn_chars: int = 2_000_000
    """Longest turn that is parsed at all."""


@dataclass(frozen=True)
class ToolCall:
    """One call: the tool's name, its arguments (a JSON object) and the call's id.

    `id` comes from OpenAI ``tool_calls`` where given, else ``call_<i>`` by position.
    """

    name: str
    arguments: dict[str, Any]
    id: str


@dataclass(frozen=True)
class ParsedTurn:
    """What an assistant turn asked for.

    `calls` are the calls that could be read (in order); `errors` say, one string
    each, what could not (a call that is malformed is left out of `calls`);
    `text` is the turn's text outside the calls (the final answer when there are
    no calls); `style` is the form found: ``openai``, ``json``, ``hermes`` or
    ``text`` (no call attempted).
    """

    calls: tuple[ToolCall, ...] = ()
    text: str = ""
    errors: tuple[str, ...] = ()
    style: str = "text"

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def is_final_answer(self) -> bool:
        """No call attempted: the text is the agent's answer."""
        return self.style == "text" and not self.errors


@dataclass
class _Reader:
    limits: CallLimits
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, where: str, obj: Any, call_id: str | None = None) -> None:
        """Check one decoded call object and keep it, or record what is wrong with it."""
        if not isinstance(obj, dict):
            self.errors.append(
                f"{where}: expected a JSON object with 'name' and 'arguments', got {_kind(obj)}."
            )
            return
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            self.errors.append(f"{where}: missing the tool's 'name' (a non-empty string).")
            return
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            args = self.decode(f"{where} ({name})", args, "arguments")
            if args is None:
                return
        if not isinstance(args, dict):
            self.errors.append(f"{where} ({name}): 'arguments' must be a JSON object, got {_kind(args)}.")
            return
        problem = _bounds(args, self.limits)
        if problem:
            self.errors.append(f"{where} ({name}): {problem}")
            return
        self.calls.append(ToolCall(name=name, arguments=args, id=call_id or f"call_{len(self.calls)}"))

    def decode(self, where: str, text: str, what: str) -> Any:
        """JSON text to a value, or None with the reason recorded; refuses text over the size limit."""
        if len(text) > self.limits.max_argument_chars + 1000:
            self.errors.append(
                f"{where}: {what} is {len(text):,} characters, over the limit of "
                f"{self.limits.max_argument_chars:,} characters."
            )
            return None
        try:
            return json.loads(text)
        except RecursionError:
            self.errors.append(f"{where}: {what} is nested too deeply (limit {self.limits.max_depth}).")
        except ValueError as e:
            self.errors.append(f"{where}: {what} is not valid JSON ({e}).")
        return None


def parse_tool_calls(action: str | Message, limits: CallLimits | None = None) -> ParsedTurn:
    """Read the tool calls (or the final answer) in an assistant turn; never raises on bad input."""
    limits = limits or CallLimits()
    if isinstance(action, dict):
        text = action.get("content") or ""
        raw_calls = action.get("tool_calls")
        if not isinstance(text, str):
            return ParsedTurn(errors=(f"The message's content must be a string, got {_kind(text)}.",))
        if raw_calls:
            return _parse_openai(raw_calls, text, limits)
    elif isinstance(action, str):
        text = action
    else:
        return ParsedTurn(errors=(f"A turn must be a string or an assistant message, got {_kind(action)}.",))
    if len(text) > limits.max_turn_chars:
        return ParsedTurn(
            text="",
            style="text",
            errors=(
                f"The turn is {len(text):,} characters, over the limit of {limits.max_turn_chars:,} characters; "
                "nothing was read.",
            ),
        )
    if "<tool_call>" in text:
        return _parse_hermes(text, limits)
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if body.startswith(("{", "[")):
        return _parse_json(body, limits)
    return ParsedTurn(text=text)


def _parse_openai(raw_calls: Any, text: str, limits: CallLimits) -> ParsedTurn:
    r = _Reader(limits)
    if not isinstance(raw_calls, list):
        return ParsedTurn(
            text=text, style="openai", errors=(f"'tool_calls' must be a list, got {_kind(raw_calls)}.",)
        )
    if len(raw_calls) > limits.max_calls:
        return ParsedTurn(text=text, style="openai", errors=(_too_many(len(raw_calls), limits),))
    for i, raw in enumerate(raw_calls):
        where = f"tool call {i + 1}"
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(fn, dict):
            r.errors.append(
                f"{where}: expected {{'type': 'function', 'function': {{'name', 'arguments'}}}}, "
                f"got {_kind(raw)}."
            )
            continue
        call_id = raw.get("id") if isinstance(raw.get("id"), str) and raw.get("id") else None
        r.add(where, {"name": fn.get("name"), "arguments": fn.get("arguments", {})}, call_id)
    return ParsedTurn(calls=tuple(r.calls), text=text, errors=tuple(r.errors), style="openai")


def _parse_hermes(text: str, limits: CallLimits) -> ParsedTurn:
    r = _Reader(limits)
    outside, last, count = [], 0, 0
    for m in _TAG.finditer(text):
        count += 1
        outside.append(text[last : m.start()])
        last = m.end()
        if count > limits.max_calls:
            n = count + text.count("<tool_call>", last)
            return ParsedTurn(text="", style="hermes", errors=(_too_many(n, limits),))
        where = f"tool call {count}"
        if not m.group(2):
            r.errors.append(f"{where}: <tool_call> is not closed with </tool_call>.")
            continue
        obj = r.decode(where, m.group(1).strip(), "the call")
        if obj is not None:
            r.add(where, obj)
    outside.append(text[last:])
    return ParsedTurn(
        calls=tuple(r.calls), text="".join(outside).strip(), errors=tuple(r.errors), style="hermes"
    )


def _parse_json(body: str, limits: CallLimits) -> ParsedTurn:
    """One JSON value (an object or a list of objects) or several objects in a row; nothing else after them."""
    r = _Reader(limits)
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = 0
    while pos < len(body):
        try:
            value, end = decoder.raw_decode(body, pos)
        except RecursionError:
            return ParsedTurn(
                style="json", errors=(f"The tool call JSON is nested too deeply (limit {limits.max_depth}).",)
            )
        except ValueError as e:
            if not values:
                return ParsedTurn(style="json", errors=(f"The tool call is not valid JSON: {e}.",))
            return ParsedTurn(
                style="json",
                errors=(
                    f"Text after the tool call JSON: {body[pos : pos + 40]!r}. A turn that calls tools in JSON must hold "
                    f"only the JSON (or use <tool_call> tags).",
                ),
            )
        values.extend(value if isinstance(value, list) else [value])
        if len(values) > limits.max_calls:  # stop reading: a stream of calls is counted only up to here
            more = pos + 1 < len(body) and not isinstance(value, list)
            return ParsedTurn(style="json", errors=(_too_many(len(values), limits, at_least=more),))
        pos = end
        while pos < len(body) and body[pos] in " \t\r\n,":
            pos += 1
    for i, value in enumerate(values):
        r.add(f"tool call {i + 1}", value)
    return ParsedTurn(calls=tuple(r.calls), errors=tuple(r.errors), style="json")


def _too_many(n: int, limits: CallLimits, at_least: bool = False) -> str:
    return (
        f"The turn makes {'at least ' if at_least else ''}{n:,} tool calls; at most {limits.max_calls} are "
        f"allowed in one turn. Nothing was run."
    )


def _bounds(args: dict[str, Any], limits: CallLimits) -> str | None:
    """Depth and size of decoded arguments, checked without recursion."""
    stack: list[tuple[Any, int]] = [(args, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        if depth > limits.max_depth:
            return f"arguments are nested {depth}+ levels deep; the limit is {limits.max_depth}."
        if isinstance(value, dict):
            children = list(value.values())
            seen += sum(len(str(k)) for k in value)
        elif isinstance(value, list):
            children = value
        else:
            seen += len(value) if isinstance(value, str) else 8
            children = []
        if seen > limits.max_argument_chars:
            return f"arguments are over the limit of {limits.max_argument_chars:,} characters."
        stack.extend((c, depth + 1) for c in children)
    return None


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


# ---- schemas --------------------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


def tool_name(tool: dict[str, Any]) -> str:
    """The name of an OpenAI function tool (``{"type": "function", "function": {...}}``) or a bare function schema."""
    return str((tool.get("function") or tool).get("name", ""))


def tool_parameters(tool: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments (an empty object schema if none)."""
    return (tool.get("function") or tool).get("parameters") or {"type": "object", "properties": {}}


def validate_arguments(arguments: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """What is wrong with `arguments` under a JSON Schema: required, types, enums, nested properties and items.

    The subset of JSON Schema that OpenAI function tools use. Properties not in
    the schema are errors unless ``additionalProperties`` allows them. Returns
    [] when the arguments fit.
    """
    errors: list[str] = []
    stack: list[tuple[Any, dict[str, Any], str, int]] = [(arguments, schema, path, 0)]
    while stack and len(errors) < 20:
        value, sch, where, depth = stack.pop()
        if depth > 64 or not isinstance(sch, dict):
            continue
        label = f"argument '{where}'" if where else "the arguments"
        types = sch.get("type")
        if types is not None:
            allowed = [types] if isinstance(types, str) else list(types)
            if not any(_is_type(value, t) for t in allowed):
                errors.append(f"{label} must be {' or '.join(allowed)}, got {_kind(value)} {_short(value)}.")
                continue
        if "enum" in sch and value not in sch["enum"]:
            errors.append(f"{label} must be one of {sch['enum']!r}, got {_short(value)}.")
            continue
        if isinstance(value, dict):
            props = sch.get("properties") or {}
            for name in sch.get("required") or []:
                if name not in value:
                    errors.append(f"missing required argument '{_join(where, name)}'.")
            extra = sch.get("additionalProperties", not props)
            for name, item in value.items():
                if name in props:
                    stack.append((item, props[name], _join(where, name), depth + 1))
                elif extra is False:
                    errors.append(
                        f"unknown argument '{_join(where, name)}' (expected: {', '.join(props) or 'none'})."
                    )
                elif isinstance(extra, dict):
                    stack.append((item, extra, _join(where, name), depth + 1))
        elif isinstance(value, (list, tuple)) and isinstance(sch.get("items"), dict):
            for i, item in enumerate(value):
                stack.append((item, sch["items"], f"{where}[{i}]", depth + 1))
    return errors


def check_call(call: ToolCall, tools: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> str | None:
    """None if `call` names one of `tools` with arguments that fit its schema, else one message saying why not."""
    by_name = {tool_name(t): t for t in tools}
    if call.name not in by_name:
        return f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(by_name)) or 'none'}."
    errors = validate_arguments(call.arguments, tool_parameters(by_name[call.name]))
    if errors:
        return f"Invalid arguments for '{call.name}': " + " ".join(errors)
    return None


def _is_type(value: Any, t: str) -> bool:
    if t in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _JSON_TYPES.get(t, (object,)))


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _short(value: Any, n: int = 60) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


# ---- writing calls and results --------------------------------------------------------------------


def tool_message(call: ToolCall, content: str) -> Message:
    """The `tool` message that answers `call` (OpenAI's shape: ``tool_call_id``, ``name``, ``content``)."""
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def format_calls(
    calls: list[ToolCall] | tuple[ToolCall, ...], style: str = "hermes", text: str = ""
) -> str | Message:
    """Write `calls` in one of the forms `parse_tool_calls` reads (the oracle and tests use it).

    ``openai`` gives an assistant message dict; ``json`` a JSON object (one call)
    or list; ``hermes`` one ``<tool_call>`` tag per call after `text`.
    """
    if style == "openai":
        return {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ],
        }
    objs = [{"name": c.name, "arguments": c.arguments} for c in calls]
    if style == "json":
        return json.dumps(objs[0] if len(objs) == 1 else objs)
    if style == "hermes":
        tags = "\n".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>" for o in objs)
        return f"{text}\n{tags}" if text else tags
    raise ValueError(f"style must be one of {STYLES}, got {style!r}.")
