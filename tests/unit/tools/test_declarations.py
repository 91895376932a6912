"""TypeScript declarations of tool inputs from JSON Schema (pure; the compiler check is in e2e)."""

from __future__ import annotations

from typing import Any

from shared.tools.declarations import MAX_CHARS, input_type, tool_declaration, with_declarations


def _obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required or [], **extra}


def test_required_and_optional_fields_with_their_descriptions_as_jsdoc() -> None:
    schema = _obj(
        {
            "timezone": {"type": "string", "description": "IANA name, e.g. 'Europe/Paris'"},
            "limit": {"type": "integer", "default": 10},
        },
        ["timezone"],
    )
    assert input_type(schema) == (
        "{\n"
        "  /** IANA name, e.g. 'Europe/Paris' */\n"
        "  timezone: string;\n"
        "  /** @default 10 */\n"
        "  limit?: number;\n"
        "}"
    )


def test_the_declaration_names_the_type_and_says_how_to_call_the_tool() -> None:
    text = tool_declaration("time", "get_current_time", "Get the time.", _obj({}))
    assert text == (
        "/**\n * Get the time.\n *\n * Call: await mcp.time.get_current_time(args)\n */\n"
        "type TimeGetCurrentTimeArgs = Record<string, unknown>;"
    )
    dashed = tool_declaration("my-server", "get-sum", "", _obj({}))
    assert dashed.startswith('/** Call: await mcp["my-server"]["get-sum"](args) */\n')
    assert "type MyServerGetSumArgs =" in dashed
    assert "type T1StArgs" in tool_declaration("1", "st", "", {})


def test_scalars_enums_consts_and_nullable() -> None:
    assert input_type({"type": "integer"}) == "number"
    assert input_type({"type": "boolean"}) == "boolean"
    assert (
        input_type({"enum": ["fast", "slow", 3, None, True]}) == '"fast" | "slow" | 3 | null | true'
    )
    assert input_type({"const": 'say "hi"'}) == '"say \\"hi\\""'
    assert input_type({"type": ["string", "null"]}) == "string | null"
    assert input_type({"type": "string", "nullable": True}) == "string | null"
    assert input_type({"const": {"a": 1}}) == "unknown"  # no literal type for an object


def test_unions_intersections_and_arrays() -> None:
    assert input_type({"anyOf": [{"type": "string"}, {"type": "number"}]}) == "string | number"
    assert input_type({"oneOf": [{"type": "string"}, {"type": "string"}]}) == "string"
    assert input_type({"anyOf": [{"type": "string"}, {}]}) == "unknown"  # unknown absorbs
    assert input_type({"type": "array", "items": {"type": ["string", "number"]}}) == (
        "(string | number)[]"
    )
    assert input_type({"type": "array"}) == "unknown[]"
    assert input_type(
        {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
    ) == ("number[][]")
    both = {"allOf": [_obj({"a": {"type": "number"}}, ["a"]), _obj({"b": {"type": "string"}})]}
    assert input_type(both) == "{\n  a: number;\n} & {\n  b?: string;\n}"
    nullable_items = {"type": "array", "items": {**_obj({"y": {"const": 3}}), "nullable": True}}
    assert input_type(nullable_items) == "({\n  y?: 3;\n} | null)[]"


def test_tuples_in_both_drafts() -> None:
    new = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": False}
    assert input_type(new) == "[string, number]"
    old = {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}}
    assert input_type(old) == "[string, ...boolean[]]"


def test_additional_properties() -> None:
    assert input_type({"type": "object", "additionalProperties": {"type": "string"}}) == (
        "Record<string, string>"
    )
    assert input_type({"type": "object", "additionalProperties": False}) == "Record<string, never>"
    closed = input_type(_obj({"a": {"type": "number"}}, additionalProperties=False))
    assert closed == "{\n  a?: number;\n}"
    # Named fields of another type than the extras: TypeScript needs `unknown` for both.
    open_ = input_type(_obj({"a": {"type": "number"}}, additionalProperties={"type": "string"}))
    assert open_ == "{\n  a?: number;\n  [key: string]: unknown;\n}"


def test_nested_objects_are_indented_and_names_that_are_not_identifiers_quoted() -> None:
    schema = _obj(
        {"outer": _obj({"in-ner": {"type": "string"}, "$ok": {"type": "number"}}, ["in-ner"])},
        ["outer"],
    )
    assert input_type(schema) == (
        '{\n  outer: {\n    "in-ner": string;\n    $ok?: number;\n  };\n}'
    )


def test_refs_are_inlined_and_recursive_external_or_missing_ones_are_unknown() -> None:
    schema = {
        **_obj(
            {
                "point": {"$ref": "#/$defs/Point"},
                "node": {"$ref": "#/definitions/Node"},
                "remote": {"$ref": "https://example.com/s.json"},
                "missing": {"$ref": "#/$defs/Nope"},
            },
            ["point"],
        ),
        "$defs": {"Point": _obj({"x": {"type": "number"}}, ["x"])},
        "definitions": {"Node": _obj({"next": {"$ref": "#/definitions/Node"}})},
    }
    assert input_type(schema) == (
        "{\n"
        "  point: {\n    x: number;\n  };\n"
        "  node?: {\n    next?: unknown;\n  };\n"
        "  remote?: unknown;\n"
        "  missing?: unknown;\n"
        "}"
    )


def test_a_description_cannot_close_its_comment_and_multi_line_ones_stay_comments() -> None:
    text = input_type(_obj({"a": {"type": "string", "description": "ends */ here\nsecond | line"}}))
    assert text == "{\n  /**\n   * ends *\\/ here\n   * second | line\n   */\n  a?: string;\n}"
    # A comment's `|` is not a union: only the real one is parenthesised before `[]`.
    arr = input_type(
        {"type": "array", "items": {**_obj({"a": {"type": "string", "description": "x | y"}})}}
    )
    assert arr.endswith("}[]") and not arr.startswith("(")


def test_unknown_and_hostile_schemas_never_raise() -> None:
    for schema in (None, True, 3, "object", [], {}, {"type": "weird"}, {"type": 7}, {"not": {}}):
        assert input_type(schema) == "unknown"
    assert input_type(False) == "never"
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = _obj({"d": deep})
    assert "unknown" in input_type(deep)  # cut at MAX_DEPTH, not a RecursionError
    huge = _obj({f"f{i}": {"type": "string", "description": "x" * 200} for i in range(200)})
    text = tool_declaration("s", "t", "", huge)
    assert len(text) <= MAX_CHARS and text.endswith("type STArgs = Record<string, unknown>;")


def test_rows_get_a_declaration_each() -> None:
    rows = [{"server": "a", "name": "b", "description": None, "input_schema": {}}]
    assert with_declarations(rows) == [
        {**rows[0], "declaration": "/** Call: await mcp.a.b(args) */\ntype ABArgs = unknown;"}
    ]


def test_a_declared_output_schema_adds_the_type_of_the_result() -> None:
    text = tool_declaration(
        "filesystem",
        "read_text_file",
        "Read a file.",
        _obj({"path": {"type": "string"}}),
        _obj({"content": {"type": "string"}}),
    )
    assert "Call: const result: FilesystemReadTextFileResult = " in text
    assert text.endswith("type FilesystemReadTextFileResult = {\n  content?: string;\n};")
    wrapped = tool_declaration("s", "t", "", {}, _obj({"result": {"type": "integer"}}))
    assert wrapped.endswith("type STResult = number;")
    assert "Result" not in tool_declaration("s", "t", "", {}, None)
