"""Parameter schema inference: what a caller of a learned capability must pass."""

from __future__ import annotations

from typing import Any

import pytest

from shared.capabilities.schema import infer_parameters_schema

TOOLS: dict[str, dict[str, Any]] = {
    "fs:read": {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "File to read"}},
        "required": ["path"],
    },
    "github:list_commits": {
        "type": "object",
        "properties": {
            "repo": {"type": "string"},
            "limit": {"type": "integer"},
            "include_merges": {"type": "boolean"},
        },
    },
    # A server name with a dash: proxies spell it with an underscore.
    "google-maps:search": {"input_schema": {"properties": {"radius_m": {"type": "number"}}}},
}


def infer(code: str) -> dict[str, Any]:
    return infer_parameters_schema(code=code, tool_schemas=TOOLS)


# (code, parameter, expected JSON type or None for "any", required?, default or absent)
CASES: list[tuple[str, str, str | None, bool, Any]] = [
    # Tool-typed: the parameter flows into a tool keyword.
    ("await mcp.fs.read(path=args.path)", "path", "string", True, ...),
    ("await mcp.github.list_commits(limit=args['n'])", "n", "integer", True, ...),
    ("p = args.file\nawait mcp.fs.read(path=p)", "file", "string", True, ...),
    ('await mcp.fs.read({"path": args.target})', "target", "string", True, ...),
    ("await mcp.google_maps.search(radius_m=args.radius)", "radius", "number", True, ...),
    # Defaulted: the default gives the type and makes it optional.
    ('n = args.get("n", 10)', "n", "integer", False, 10),
    ('args.get("verbose", False)', "verbose", "boolean", False, False),
    ('args.get("tags", ["a"])', "tags", "array", False, ["a"]),
    # A tool type beats the default's type.
    ('await mcp.github.list_commits(limit=args.get("limit", 2.5))', "limit", "integer", False, 2.5),
    # Subscripted.
    ('return args["query"]', "query", None, True, ...),
    ('if args["mode"] == "fast": pass', "mode", "string", True, ...),
    # Usage with literals.
    ("for i in range(args.count): pass", "count", "integer", True, ...),
    ("total = args.price * 1.2", "price", "number", True, ...),
    ("for item in args.items: pass", "items", "array", True, ...),
    ("label = args.name.strip()", "name", "string", True, ...),
    # Unknown: nothing says what it is.
    ("return args.anything", "anything", None, True, ...),
    ("await mcp.unknown.tool(x=args.x)", "x", None, True, ...),
    ("await mcp.fs.read(path=f'/tmp/{args.stem}')", "stem", None, True, ...),
]


@pytest.mark.parametrize(("code", "name", "json_type", "required", "default"), CASES)
def test_inference_table(
    code: str, name: str, json_type: str | None, required: bool, default: Any
) -> None:
    schema = infer(code)
    prop = schema["properties"][name]
    assert prop.get("type") == json_type
    if json_type is None:
        assert "anyOf" not in prop  # no type at all: any value is accepted
    assert (name in schema.get("required", [])) is required
    if default is ...:
        assert "default" not in prop
    else:
        assert prop["default"] == default


def test_tool_description_is_carried_over() -> None:
    prop = infer("await mcp.fs.read(path=args.path)")["properties"]["path"]
    assert prop["description"] == "File to read"


def test_get_without_default_is_optional_and_nullable() -> None:
    code = 'p = args.get("path")\nif p:\n    await mcp.fs.read(path=p)'
    schema = infer(code)
    assert schema.get("required", []) == []
    prop = schema["properties"]["path"]
    assert prop["default"] is None
    assert {"type": "string"} in prop["anyOf"] and {"type": "null"} in prop["anyOf"]


def test_computed_default_is_optional_without_a_default_value() -> None:
    schema = infer('since = args.get("since", today())')
    assert "since" not in schema.get("required", [])
    assert "default" not in schema["properties"]["since"]


def test_membership_test_makes_a_parameter_optional() -> None:
    schema = infer('if "limit" in args:\n    n = args.limit')
    assert "limit" not in schema.get("required", [])


def test_whole_schema_for_a_two_tool_capability() -> None:
    code = """
commits = await mcp.github.list_commits(repo=args.repo, limit=args.get("limit", 20))
await mcp.fs.read(path=args["out"])
return len(commits)
"""
    schema = infer(code)
    assert schema["type"] == "object"
    assert list(schema["properties"]) == ["repo", "limit", "out"]  # source order
    assert schema["required"] == ["repo", "out"]
    assert schema["properties"]["limit"] == {"default": 20, "title": "limit", "type": "integer"}


def test_awkward_parameter_names_survive() -> None:
    code = 'a = args["class"]\nb = args["_private"]\nc = args["model_config"]\nd = args["my-key"]'
    assert set(infer(code)["properties"]) == {"class", "_private", "model_config", "my-key"}


@pytest.mark.parametrize(
    "code",
    [
        "return 42",
        'k = "x"\nreturn args[k]',  # a computed key cannot be named
        "return {k: v for k, v in args.items()}",  # methods of args are not parameters
        "def f(:",  # does not parse
    ],
    ids=["no-args", "dynamic-key", "args-methods", "syntax-error"],
)
def test_no_parameters_gives_the_empty_object_schema(code: str) -> None:
    assert infer(code) == {"type": "object", "properties": {}}
