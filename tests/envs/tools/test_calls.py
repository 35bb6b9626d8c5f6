"""argym.envs.tools.calls: every call form is read, bad input becomes an error string, schemas are enforced."""

from __future__ import annotations

import json

import pytest

from argym.envs.tools.calls import (
    CallLimits,
    ToolCall,
    check_call,
    format_calls,
    parse_tool_calls,
    tool_message,
    validate_arguments,
)

ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "mode": {"type": "string", "enum": ["fast", "exact"]},
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}


def _calls(turn):
    return [(c.name, c.arguments) for c in turn.calls]


# ---- the forms ----------------------------------------------------------------------------------


def test_openai_tool_calls_on_a_message_dict():
    msg = {
        "role": "assistant",
        "content": "Let me add.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
            {"id": "c2", "type": "function", "function": {"name": "add", "arguments": {"a": 3, "b": 4}}},
        ],
    }
    turn = parse_tool_calls(msg)
    assert turn.ok and turn.style == "openai" and turn.text == "Let me add."
    assert _calls(turn) == [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]
    assert [c.id for c in turn.calls] == ["c1", "c2"]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "add", "arguments": {"a": 1, "b": 2}}',
        '  {"name": "add", "parameters": {"a": 1, "b": 2}}\n',
        '```json\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n```',
        '{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}',
    ],
)
def test_one_openai_style_json_call_in_text(text):
    turn = parse_tool_calls(text)
    assert turn.ok and turn.style == "json" and _calls(turn) == [("add", {"a": 1, "b": 2})]
    assert not turn.is_final_answer


@pytest.mark.parametrize(
    "text",
    [
        '[{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "add", "arguments": {"a": 3, "b": 4}}]',
        '{"name": "add", "arguments": {"a": 1, "b": 2}}\n{"name": "add", "arguments": {"a": 3, "b": 4}}',
    ],
)
def test_several_json_calls_in_text(text):
    turn = parse_tool_calls(text)
    assert turn.ok and _calls(turn) == [("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})]
    assert [c.id for c in turn.calls] == ["call_0", "call_1"]


def test_hermes_tags_with_text_around_them():
    text = (
        'I will add both.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
        '<tool_call>{"name": "add", "arguments": {"a": 5, "b": 6}}</tool_call>\nDone.'
    )
    turn = parse_tool_calls(text)
    assert turn.ok and turn.style == "hermes"
    assert _calls(turn) == [("add", {"a": 1, "b": 2}), ("add", {"a": 5, "b": 6})]
    assert turn.text == "I will add both.\n\n\nDone."


def test_hermes_tags_inside_a_message_dict_without_tool_calls():
    turn = parse_tool_calls(
        {"role": "assistant", "content": '<tool_call>{"name": "add", "arguments": {}}</tool_call>'}
    )
    assert turn.style == "hermes" and _calls(turn) == [("add", {})]


def test_plain_text_is_a_final_answer():
    for text in ("The answer is 42.", "", "x = {1, 2}"):
        turn = parse_tool_calls(text)
        assert turn.is_final_answer and turn.calls == () and turn.text == text


@pytest.mark.parametrize("style", ["openai", "json", "hermes"])
def test_format_then_parse_round_trips(style):
    calls = [ToolCall("add", {"a": 1, "b": [2, {"c": "d"}]}, "call_0"), ToolCall("f.g", {}, "call_1")]
    turn = parse_tool_calls(format_calls(calls, style))
    assert turn.ok and list(turn.calls) == calls


def test_tool_message_answers_the_call_by_id():
    msg = tool_message(ToolCall("add", {}, "c9"), "3")
    assert msg == {"role": "tool", "tool_call_id": "c9", "name": "add", "content": "3"}


# ---- bad input: an error that says what was wrong, never an exception ------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"name": "add", "arguments": {"a": 1, "b": 2}', "not valid JSON"),
        ('{"name": "add", "arguments": {"a": 1}} and then some words', "Text after the tool call JSON"),
        ('<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>', "not valid JSON"),
        ('<tool_call>{"name": "add", "arguments": {}}', "not closed"),
        ('{"arguments": {"a": 1}}', "missing the tool's 'name'"),
        ('{"name": "add", "arguments": [1, 2]}', "'arguments' must be a JSON object"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_malformed_calls_are_errors(text, expected):
    turn = parse_tool_calls(text)
    assert not turn.ok and turn.calls == () and expected in " ".join(turn.errors)


def test_openai_arguments_that_are_not_json():
    msg = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{a: 1}"}},
            {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}},
            "not a call",
        ],
    }
    turn = parse_tool_calls(msg)
    assert _calls(turn) == [("add", {"a": 1, "b": 1})]  # the readable call is kept
    assert len(turn.errors) == 2 and "tool call 1 (add): arguments is not valid JSON" in turn.errors[0]
    assert "tool call 3" in turn.errors[1]


@pytest.mark.parametrize("form", ["hermes", "json_list", "json_stream", "openai"])
def test_ten_thousand_calls_are_refused_whole(form):
    one = {"name": "add", "arguments": {"a": 1, "b": 2}}
    action = {
        "hermes": "".join(f"<tool_call>{json.dumps(one)}</tool_call>" for _ in range(10_000)),
        "json_list": json.dumps([one] * 10_000),
        "json_stream": "\n".join(json.dumps(one) for _ in range(10_000)),
        "openai": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                for i in range(10_000)
            ],
        },
    }[form]
    turn = parse_tool_calls(action)
    assert turn.calls == () and len(turn.errors) == 1
    counted = (
        "at least 33 tool calls" if form == "json_stream" else "10,000 tool calls"
    )  # a stream is read only so far
    assert counted in turn.errors[0] and "at most 32 are allowed" in turn.errors[0]


@pytest.mark.parametrize("depth", [40, 5000, 100_000])
def test_deeply_nested_arguments_are_refused(depth):
    # 40: decoded, then refused by depth; 5000: past Python's recursion limit while decoding; 100,000: too big
    nested = "[" * depth + "]" * depth
    for text in (
        f'{{"name": "add", "arguments": {{"x": {nested}}}}}',
        f'<tool_call>{{"name": "add", "arguments": {{"x": {nested}}}}}</tool_call>',
    ):
        turn = parse_tool_calls(text)
        assert turn.calls == () and len(turn.errors) == 1
        assert (
            ("nested" in turn.errors[0])
            if depth < 100_000
            else ("characters" in turn.errors[0] or "nested" in turn.errors[0])
        )


def test_a_one_megabyte_argument_is_refused():
    big = "a" * 1_000_000
    for action in (
        json.dumps({"name": "add", "arguments": {"x": big}}),
        f"<tool_call>{json.dumps({'name': 'add', 'arguments': {'x': big}})}</tool_call>",
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "add", "arguments": json.dumps({"x": big})},
                }
            ],
        },
    ):
        turn = parse_tool_calls(action)
        assert (
            turn.calls == ()
            and len(turn.errors) == 1
            and "over the limit of 100,000 characters" in turn.errors[0]
        )


def test_limits_are_configurable():
    turn = parse_tool_calls(
        '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]', CallLimits(max_calls=1)
    )
    assert turn.calls == () and "at most 1" in turn.errors[0]


def test_a_huge_turn_is_not_parsed():
    turn = parse_tool_calls("{" + " " * 3_000_000)
    assert turn.calls == () and "over the limit" in turn.errors[0]


@pytest.mark.parametrize("action", [None, 42, ["a"], {"role": "assistant", "content": 3}])
def test_actions_of_the_wrong_type(action):
    turn = parse_tool_calls(action)
    assert not turn.ok and turn.calls == ()


# ---- schemas -------------------------------------------------------------------------------------


def test_arguments_that_fit():
    assert check_call(ToolCall("add", {"a": 1, "b": 2, "mode": "fast"}, "c"), [ADD]) is None


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"a": 1}, "missing required argument 'b'"),
        ({"a": "1", "b": 2}, "argument 'a' must be integer, got a string"),
        ({"a": True, "b": 2}, "argument 'a' must be integer, got a boolean"),
        ({"a": 1.5, "b": 2}, "argument 'a' must be integer"),
        ({"a": 1, "b": 2, "mode": "slow"}, "must be one of ['fast', 'exact']"),
        ({"a": 1, "b": 2, "c": 3}, "unknown argument 'c'"),
    ],
)
def test_arguments_that_do_not_fit(args, expected):
    problem = check_call(ToolCall("add", args, "c"), [ADD])
    assert problem is not None and problem.startswith("Invalid arguments for 'add'") and expected in problem


def test_unknown_tool_lists_the_available_ones():
    problem = check_call(ToolCall("sub", {}, "c"), [ADD])
    assert problem == "Unknown tool 'sub'. Available tools: add."


def test_nested_schemas():
    schema = {
        "type": "object",
        "required": ["items"],
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {"id": {"type": "integer"}, "w": {"type": "number"}},
                },
            },
            "opt": {"type": ["string", "null"]},
        },
    }
    assert validate_arguments({"items": [{"id": 1, "w": 2}, {"id": 2, "w": 0.5}], "opt": None}, schema) == []
    errors = validate_arguments({"items": [{"id": 1}, {"w": "x"}], "opt": 3}, schema)
    assert "missing required argument 'items[1].id'." in errors
    assert any("argument 'items[1].w' must be number" in e for e in errors)
    assert any("argument 'opt' must be string or null" in e for e in errors)


def test_validation_of_deep_values_is_bounded():
    value: list = []
    for _ in range(5000):
        value = [value]
    schema = {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "array"}}}}
    assert (
        validate_arguments({"x": value}, schema) == []
    )  # no recursion error: the walk is iterative and capped
