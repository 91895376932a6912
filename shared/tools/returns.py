"""What a tool call returns to agent code, said in one short line for search hits.

The convention (``services/toolhost/results.py``): a tool that returns structured content
(every tool declaring an ``outputSchema`` must) gives code that object, ``{"result": v}``
unwrapped to ``v`` when the schema's only property is ``result``; any other tool gives its
text (a JSON object or array in the text parsed), several texts as a list, and other content
(images, audio, resources) as a list of content blocks. The line carries a small example
built from the output schema, bounded whatever the schema holds, so hits stay small.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 3  # nesting shown in an example; deeper values are elided
MAX_PROPERTIES = 6  # properties shown per object; the rest are elided
MAX_CHARS = 200  # an example longer than this is cut
_PLACEHOLDER = {"string": "…", "number": 0, "integer": 0, "boolean": False, "null": None}

TEXT_CONVENTION = (
    "its text (JSON text arrives parsed); images, audio, resources: a list of content blocks"
)


def returns_line(output_schema: Any) -> str:
    """What ``await mcp.<server>.<tool>(...)`` gives code, with an example, in one line."""
    if not isinstance(output_schema, Mapping):
        return f"returns {TEXT_CONVENTION}"
    if (wrapped := result_schema(output_schema)) is not output_schema:
        example = _example(wrapped, depth=0)
        return f"returns its structured result unwrapped, e.g. {_shown(example)}"
    example = _example(output_schema, depth=0)
    return f"returns its structured content (see output_schema), e.g. {_shown(example)}"


def result_schema(output_schema: Mapping[str, Any]) -> Any:
    """The schema of what code receives: the ``result`` property's when it is the only one
    (SDK servers wrap a non-object return value so), else the output schema itself."""
    props = output_schema.get("properties")
    if isinstance(props, Mapping) and set(props) == {"result"}:
        return props["result"]
    return output_schema


def _example(schema: Any, *, depth: int) -> Any:
    """A value of the schema's shape: placeholders for scalars, first enum or const value."""
    if not isinstance(schema, Mapping):
        return "…"
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _example(options[0], depth=depth)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        if depth >= MAX_DEPTH:
            return {"…": "…"}
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return {}
        shown = list(props.items())[:MAX_PROPERTIES]
        value = {str(k): _example(v, depth=depth + 1) for k, v in shown}
        if len(props) > MAX_PROPERTIES:
            value["…"] = "…"
        return value
    if kind == "array":
        if depth >= MAX_DEPTH:
            return ["…"]
        return [_example(schema.get("items"), depth=depth + 1)]
    if isinstance(kind, str) and kind in _PLACEHOLDER:
        return _PLACEHOLDER[kind]
    return "…"


def _shown(example: Any) -> str:
    """The example as Python code sees it (``repr``: dicts, lists, str), bounded."""
    text = repr(example)
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
