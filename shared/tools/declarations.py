"""TypeScript declarations of MCP tools' inputs and results, derived from their JSON Schemas.

An agent writing TypeScript calls ``await mcp.<server>.<tool>({...})`` with one object;
a declaration of that object's type, with each field's description as a JSDoc comment,
lets it write a correct call the first time (the right names, which are optional, which
literals an enum allows) instead of learning them from ``invalid_arguments`` errors. A tool
that declares an ``outputSchema`` also gets the type of what the call returns (its
structured content, ``returns.result_schema``).

Pure and total: any JSON value is accepted as a schema. What has no TypeScript
equivalent (``not``, ``if``/``then``, pattern properties, formats) widens to what
TypeScript can say, never narrows: a declaration may accept a value the server refuses,
but never refuses one it accepts. A schema deeper than ``MAX_DEPTH`` levels or a ``$ref``
that is recursive, external or missing becomes ``unknown``. Schemas come from downstream
servers, so the output is bounded (``MAX_CHARS``) whatever they hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from shared.tools.returns import result_schema

MAX_DEPTH = 12
MAX_CHARS = 16_000
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_SIMPLE = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
}
_INDENT = "  "


def tool_declaration(
    server: str, name: str, description: str, schema: Any, output_schema: Any = None
) -> str:
    """A ``type <Server><Tool>Args = {...};`` declaration of a tool's input, headed by a
    JSDoc of the tool's description and how to call it, e.g. ``await mcp.time.now(args)``;
    with an ``output_schema``, also ``type <Server><Tool>Result = ...;`` (what it returns)."""
    base = _pascal(server) + _pascal(name)
    returned = f"{base}Result"
    call = f"await {_member('mcp', server)}{_member('', name)}(args)"
    if isinstance(output_schema, Mapping):
        call = f"const result: {returned} = {call}"
    doc = f"{description.strip()}\n\nCall: {call}" if description.strip() else f"Call: {call}"
    text = f"{_jsdoc(doc, '')}type {base}Args = {_bounded(input_type(schema))};"
    if isinstance(output_schema, Mapping):
        result = _bounded(input_type(result_schema(output_schema)))
        text += f"\n/** What the call returns (the tool's structured content). */\ntype {returned} = {result};"
    return text


def _bounded(body: str) -> str:
    # A schema this large is not read by an agent anyway.
    return body if len(body) <= MAX_CHARS else "Record<string, unknown>"


def with_declarations(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool rows (``server``, ``name``, ``description``, ``input_schema``, optionally
    ``output_schema``) with ``declaration``."""
    return [
        {
            **t,
            "declaration": tool_declaration(
                t["server"],
                t["name"],
                t.get("description") or "",
                t.get("input_schema"),
                t.get("output_schema"),
            ),
        }
        for t in tools
    ]


def input_type(schema: Any) -> str:
    """The TypeScript type of values ``schema`` describes (multi-line for objects)."""
    defs = _definitions(schema)
    return _Writer(defs).type_of(schema, depth=0, refs=(), indent=0)


class _Writer:
    """One schema's conversion: ``defs`` are its ``$defs``/``definitions`` for ``$ref``."""

    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs

    def type_of(self, schema: Any, *, depth: int, refs: tuple[str, ...], indent: int) -> str:
        if schema is False:
            return "never"
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return "unknown"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, depth=depth, refs=refs, indent=indent)
        if "const" in schema:
            return self._nullable(schema, _literal(schema["const"]))
        enum = schema.get("enum")
        if isinstance(enum, list) and enum:
            return self._nullable(schema, _union([_literal(v) for v in enum]))
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                types = [
                    self.type_of(o, depth=depth + 1, refs=refs, indent=indent) for o in options
                ]
                return self._nullable(schema, _union(types))
        parts = schema.get("allOf")
        if isinstance(parts, list) and parts:
            types = [self.type_of(p, depth=depth + 1, refs=refs, indent=indent) for p in parts]
            known = [t for t in types if t != "unknown"]
            joined = " & ".join(_wrap(t) for t in dict.fromkeys(known)) if known else "unknown"
            return self._nullable(schema, joined)
        kinds = schema.get("type")
        if isinstance(kinds, list):
            types = [self._kind(schema, k, depth=depth, refs=refs, indent=indent) for k in kinds]
            return self._nullable(schema, _union(types) if types else "unknown")
        if isinstance(kinds, str):
            return self._nullable(
                schema, self._kind(schema, kinds, depth=depth, refs=refs, indent=indent)
            )
        if "properties" in schema or "additionalProperties" in schema:
            return self._nullable(
                schema, self._object(schema, depth=depth, refs=refs, indent=indent)
            )
        if "items" in schema or "prefixItems" in schema:
            return self._nullable(
                schema, self._array(schema, depth=depth, refs=refs, indent=indent)
            )
        return "unknown"

    def _kind(
        self,
        schema: Mapping[str, Any],
        kind: Any,
        *,
        depth: int,
        refs: tuple[str, ...],
        indent: int,
    ) -> str:
        if kind == "object":
            return self._object(schema, depth=depth, refs=refs, indent=indent)
        if kind == "array":
            return self._array(schema, depth=depth, refs=refs, indent=indent)
        return _SIMPLE.get(kind, "unknown") if isinstance(kind, str) else "unknown"

    def _nullable(self, schema: Mapping[str, Any], text: str) -> str:
        # OpenAPI's `nullable: true`, which some servers emit instead of a null type.
        return _union([text, "null"]) if schema.get("nullable") is True else text

    def _ref(self, ref: str, *, depth: int, refs: tuple[str, ...], indent: int) -> str:
        match = re.fullmatch(r"#/(?:\$defs|definitions)/([^/]+)", ref)
        if match is None or ref in refs:  # external, deep or recursive: not inlined
            return "unknown"
        target = self.defs.get(match.group(1).replace("~1", "/").replace("~0", "~"))
        if target is None:
            return "unknown"
        return self.type_of(target, depth=depth + 1, refs=(*refs, ref), indent=indent)

    def _object(
        self, schema: Mapping[str, Any], *, depth: int, refs: tuple[str, ...], indent: int
    ) -> str:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = schema.get("required")
        required = (
            {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        )
        extra = schema.get("additionalProperties")
        pad, inner = _INDENT * indent, _INDENT * (indent + 1)
        lines: list[str] = []
        for key, sub in props.items():
            if not isinstance(key, str):
                continue
            doc = _description(sub)
            if doc:
                lines.append(_jsdoc(doc, inner).rstrip("\n"))
            optional = "" if key in required else "?"
            sub_type = self.type_of(sub, depth=depth + 1, refs=refs, indent=indent + 1)
            lines.append(f"{inner}{_key(key)}{optional}: {sub_type};")
        if not lines:  # no named fields: a map, open unless additionalProperties is false
            if extra is False:
                return "Record<string, never>"
            value = (
                self.type_of(extra, depth=depth + 1, refs=refs, indent=indent)
                if isinstance(extra, Mapping)
                else "unknown"
            )
            return f"Record<string, {value}>"
        if extra is True or isinstance(extra, Mapping):
            # Named fields' types need not match the extra ones', and TypeScript's index
            # signature would have to cover both: the extras are `unknown` here.
            lines.append(f"{inner}[key: string]: unknown;")
        return "{\n" + "\n".join(lines) + f"\n{pad}}}"

    def _array(
        self, schema: Mapping[str, Any], *, depth: int, refs: tuple[str, ...], indent: int
    ) -> str:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems")
        if isinstance(prefix, list) and prefix:
            types = [self.type_of(p, depth=depth + 1, refs=refs, indent=indent) for p in prefix]
            if items is not False:
                rest = (
                    self.type_of(items, depth=depth + 1, refs=refs, indent=indent)
                    if isinstance(items, Mapping)
                    else "unknown"
                )
                types.append(f"...{_wrap(rest)}[]")
            return "[" + ", ".join(types) + "]"
        if isinstance(items, Mapping):
            return _wrap(self.type_of(items, depth=depth + 1, refs=refs, indent=indent)) + "[]"
        return "unknown[]"


def _definitions(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, Mapping):
        return {}
    found: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        defs = schema.get(key)
        if isinstance(defs, Mapping):
            found.update({k: v for k, v in defs.items() if isinstance(k, str)})
    return found


def _union(types: list[str]) -> str:
    unique = list(dict.fromkeys(types))
    if "unknown" in unique:
        return "unknown"
    unique = [t for t in unique if t != "never"] or ["never"]
    return " | ".join(unique)


def _wrap(text: str) -> str:
    """Parenthesised when an array suffix or intersection would bind to a part of it:
    ``(string | number)[]``, ``({...} | null)[]``; the parts' own brackets do not count."""
    return f"({text})" if _top_level_operator(text) else text


def _top_level_operator(text: str) -> bool:
    """Whether ``text`` has a ``|`` or ``&`` outside brackets, string literals and comments
    (a description may hold any character; its ``*/`` was escaped)."""
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 1
        elif char == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif char in "{[(<":
            depth += 1
        elif char in "}])>":
            depth -= 1
        elif char in "|&" and depth == 0:
            return True
        i += 1
    return False


def _literal(value: Any) -> str:
    if value is None or isinstance(value, bool | int | float | str):
        # JSON's literals are TypeScript's (a float's repr, a string's escapes).
        return json.dumps(value, ensure_ascii=False)
    return "unknown"  # an object or array constant: TypeScript has no literal type for it


def _key(name: str) -> str:
    return name if _IDENTIFIER.match(name) else json.dumps(name, ensure_ascii=False)


def _member(base: str, name: str) -> str:
    if _IDENTIFIER.match(name):
        return f"{base}.{name}"
    return f"{base}[{json.dumps(name, ensure_ascii=False)}]"


def _pascal(name: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", name)
    text = "".join(w[:1].upper() + w[1:] for w in words)
    return text if text and not text[0].isdigit() else f"T{text}"


def _description(schema: Any) -> str:
    """A field's JSDoc: its description and default (a title is mostly the field's name again)."""
    if not isinstance(schema, Mapping):
        return ""
    text = schema.get("description")
    text = text.strip() if isinstance(text, str) else ""
    default = schema.get("default")
    if "default" in schema and (default is None or isinstance(default, bool | int | float | str)):
        text = f"{text}\n@default {json.dumps(default, ensure_ascii=False)}".strip()
    return text


def _jsdoc(text: str, pad: str) -> str:
    """``/** ... */`` at ``pad``; a ``*/`` in the text cannot end the comment early."""
    lines = text.replace("*/", "*\\/").splitlines() or [""]
    if len(lines) == 1:
        return f"{pad}/** {lines[0]} */\n"
    body = "\n".join(f"{pad} * {line}".rstrip() for line in lines)
    return f"{pad}/**\n{body}\n{pad} */\n"
