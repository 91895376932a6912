"""What search hits say a tool call returns (shared/tools/returns.py): the convention code
sees (services/toolhost/results.py) with a small example from the output schema."""

from __future__ import annotations

from typing import Any

from shared.tools.returns import MAX_CHARS, returns_line


def _obj(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_a_declared_output_schema_gives_its_structured_content_with_an_example() -> None:
    read_text_file = _obj({"content": {"type": "string"}})
    assert returns_line(read_text_file) == (
        "returns its structured content (see output_schema), e.g. {'content': '…'}"
    )
    entities = _obj(
        {
            "entities": {
                "type": "array",
                "items": _obj({"name": {"type": "string"}, "n": {"type": ["integer", "null"]}}),
            },
            "kind": {"enum": ["person", "place"]},
            "ok": {"type": "boolean"},
        }
    )
    assert returns_line(entities).endswith(
        "e.g. {'entities': [{'name': '…', 'n': 0}], 'kind': 'person', 'ok': False}"
    )


def test_a_wrapped_result_is_shown_unwrapped_and_other_tools_return_their_text() -> None:
    assert returns_line(_obj({"result": {"type": "integer"}})) == (
        "returns its structured result unwrapped, e.g. 0"
    )
    text = returns_line(None)
    assert text.startswith("returns its text (JSON text arrives parsed)")
    assert "content blocks" in text


def test_any_schema_gives_a_short_line() -> None:
    wide = _obj({f"field_{i}": _obj({"x": {"type": "string"}}) for i in range(500)})
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = _obj({"d": deep})
    for schema in (wide, deep, {"type": 7}, {"properties": "x"}, [], "x", True):
        line = returns_line(schema)
        assert line.startswith("returns ") and len(line) <= MAX_CHARS + 60, line
