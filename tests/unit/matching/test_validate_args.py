"""Argument validation against an inferred JSON Schema."""

from __future__ import annotations

from shared.matching.validate_args import validate_args

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
