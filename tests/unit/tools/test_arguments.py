"""Argument validation against an inferred JSON Schema."""

from __future__ import annotations

from shared.tools.arguments import check_tool_arguments, validate_args

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer"},
        "ratio": {"type": "number"},
        "tags": {"type": "array"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
    "required": ["path", "limit"],
}


def test_valid_args_pass() -> None:
    problems = validate_args(
        schema=SCHEMA, args={"path": "/tmp/a", "limit": 3, "ratio": 1, "maybe": None}
    )
    assert problems.ok
    assert problems.message() == "arguments are valid"


def test_missing_extra_and_mistyped_are_all_listed() -> None:
    problems = validate_args(
        schema=SCHEMA, args={"limit": "ten", "pth": "/tmp", "tags": "a,b", "mode": "medium"}
    )
    assert problems.missing == ["path"]
    assert problems.extra == ["pth"]
    assert set(problems.mistyped) == {"limit", "tags", "mode"}
    assert problems.mistyped["limit"] == "expected integer, got string"
    message = problems.message()
    assert "missing required argument(s): path" in message
    assert "unknown argument(s): pth" in message


def test_bool_is_not_an_integer_and_whole_floats_are() -> None:
    assert "limit" in validate_args(schema=SCHEMA, args={"path": "p", "limit": True}).mistyped
    assert validate_args(schema=SCHEMA, args={"path": "p", "limit": 2.0}).ok


def test_additional_properties_true_allows_extras() -> None:
    schema = {"type": "object", "properties": {}, "additionalProperties": True}
    assert validate_args(schema=schema, args={"anything": 1}).ok


def test_empty_schema_rejects_unknown_args() -> None:
    assert validate_args(schema=None, args={"x": 1}).extra == ["x"]
    assert validate_args(schema=None, args={}).ok


def test_a_tool_call_that_does_not_fit_names_what_is_wrong_and_the_valid_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {"timezone": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["timezone"],
    }
    error = check_tool_arguments("time:get_current_time", schema, {"timezon": "UTC"})
    assert error is not None and error["type"] == "invalid_arguments"
    assert error["missing"] == ["timezone"] and error["extra"] == ["timezon"]
    assert "valid arguments: timezone (string, required), limit (integer)" in error["message"]
    assert check_tool_arguments("time:get_current_time", schema, {"timezone": "UTC"}) is None


def test_tools_without_properties_or_with_open_extras_are_left_to_their_server() -> None:
    assert check_tool_arguments("x:y", {}, {"anything": 1}) is None
    assert check_tool_arguments("x:y", {"type": "object"}, {"anything": 1}) is None
    open_schema = {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
    assert check_tool_arguments("x:y", open_schema, {"anything": "v"}) is None
    closed = {"type": "object", "properties": {}}
    error = check_tool_arguments("x:y", closed, {"anything": "v"})
    assert error is not None and "valid arguments: none" in error["message"]
