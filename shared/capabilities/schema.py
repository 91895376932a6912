"""Parameter schema inference: which ``args`` a capability reads and their JSON types.

Sandbox code receives its parameters as ``args`` and calls tools as
``mcp.<server>.<tool>(**kwargs)``. We read the code with ``ast`` (never run it):

- a parameter is any ``args.x``, ``args["x"]`` or ``args.get("x"[, default])``;
- its type comes, in this order, from the MCP input schema of the tool keyword it
  flows into (directly, or through one plain variable: ``p = args.path`` then
  ``mcp.fs.read(path=p)``), from its default, from how it is used (compared with or
  combined with a literal, ``range(...)``, ``for … in``, string methods), else none
  (any value);
- it is required unless it has a default (``args.get`` anywhere, or a
  ``"x" in args`` test, makes it optional).

The JSON Schema is produced by pydantic (``create_model`` + ``model_json_schema``).
"""

from __future__ import annotations

import ast
import copy
import json
import re
from collections.abc import Mapping
from dataclasses import astuple, dataclass, field
from typing import Any

from pydantic import Field, create_model

from shared import tool_ids

ARGS_NAME = "args"
MCP_NAME = "mcp"

# JSON Schema type → the Python annotation pydantic turns back into that type.
_JSON_TO_PY: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list[Any],
    "object": dict[str, Any],
    "null": type(None),
}

# Methods only strings have (among the types args can hold): calling one means "string".
_STR_METHODS = frozenset(
    {"lower", "upper", "strip", "lstrip", "rstrip", "split", "startswith", "endswith",
     "replace", "format", "encode", "title", "casefold", "splitlines", "zfill"}
)  # fmt: skip
_LIST_METHODS = frozenset({"append", "extend", "insert", "sort", "reverse"})

_MISSING = object()


@dataclass
class _Param:
    """What the code tells us about one parameter, gathered in source order."""

    name: str
    optional: bool = False
    default: Any = _MISSING  # a JSON-able default, or _MISSING (none, or not a literal)
    tool_type: Any = None  # JSON "type" value from a tool schema (str or list of str)
    tool_description: str | None = None
    default_type: str | None = None
    usage_types: list[str] = field(default_factory=list)


def infer_parameters_schema(
    *, code: str, tool_schemas: Mapping[str, Mapping[str, Any]], language: str = "python"
) -> dict[str, Any]:
    """JSON Schema (object) of the ``args`` the code reads; ``{"type": "object", "properties": {}}`` if none.

    ``tool_schemas`` maps tool ids (``server:tool``) to their MCP input schema (a
    mapping with an ``input_schema`` key is accepted too). Code that does not parse
    yields the empty schema: it never ran, so there is nothing to describe.
    """
    if language != "python":
        params = _typescript_params(code, tool_schemas)
        return _to_json_schema(params) if params else _empty_schema()
    try:
        tree = ast.parse(code.lstrip("\ufeff"))
    except (SyntaxError, ValueError):
        return _empty_schema()
    params = _Analyzer(tree, tool_schemas).run()
    if not params:
        return _empty_schema()
    return _to_json_schema(params)


# TypeScript has no parser here: patterns find `args.x` / `args["x"]` (optional when followed
# by `??` or `||`, its default when that is a literal) and `key: args.x` inside a one-level
# `mcp.server.tool({...})` object, which types x as the tool's `key`.
_TS_ARG = re.compile(
    r"\bargs\s*(?:\?\.|\.)\s*([A-Za-z_$][\w$]*)|\bargs\s*(?:\?\.)?\[\s*([\"'])([^\"'\\]+)\2\s*\]"
)
_TS_FALLBACK = re.compile(
    r"\s*(?:\?\?|\|\|)\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b|\"[^\"\\]*\"|true\b|false\b|null\b)?"
)
_TS_NAME = r"(?:\.\s*([A-Za-z_$][\w$]*)|\[\s*[\"']([^\"']+)[\"']\s*\])"
_TS_CALL = re.compile(r"\bmcp\s*" + _TS_NAME + r"\s*" + _TS_NAME + r"\s*\(\s*\{([^{}]*)\}")
_TS_TOOL_CALL = re.compile(r"\bmcp\s*" + _TS_NAME + r"\s*" + _TS_NAME + r"\s*\(")
_TS_PASSED = re.compile(
    r"([A-Za-z_$][\w$]*|\"[^\"]+\")\s*:\s*args\s*(?:\?\.|\.)\s*([A-Za-z_$][\w$]*)"
)


def _typescript_params(
    code: str, tool_schemas: Mapping[str, Mapping[str, Any]]
) -> dict[str, _Param]:
    params: dict[str, _Param] = {}
    for match in _TS_ARG.finditer(code):
        name = match.group(1) or match.group(3)
        param = params.setdefault(name, _Param(name))
        fallback = _TS_FALLBACK.match(code, match.end())
        if fallback is None or not fallback.group(0).strip():
            continue
        param.optional = True
        if fallback.group(1) is not None and param.default is _MISSING:
            param.default = json.loads(fallback.group(1))
            param.default_type = _json_type_of(param.default)
    analyzer = _Analyzer(ast.Module(body=[], type_ignores=[]), tool_schemas)
    for call in _TS_CALL.finditer(code):
        server, tool = call.group(1) or call.group(2), call.group(3) or call.group(4)
        schema = analyzer._tool_schema(tool_ids.make(server, tool))
        props = schema.get("properties") if schema is not None else None
        if not isinstance(props, Mapping):
            continue
        for passed in _TS_PASSED.finditer(call.group(5)):
            key, name = passed.group(1).strip('"'), passed.group(2)
            prop, target = props.get(key), params.get(name)
            if (
                isinstance(prop, Mapping)
                and "type" in prop
                and target is not None
                and target.tool_type is None
            ):
                target.tool_type = prop["type"]
                description = prop.get("description")
                target.tool_description = description if isinstance(description, str) else None
    return params


def _empty_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class _Analyzer:
    """One pass collecting args accesses, variable aliases, tool keywords and literal usage."""

    def __init__(self, tree: ast.Module, tool_schemas: Mapping[str, Mapping[str, Any]]) -> None:
        self.tree = tree
        self.tool_schemas = tool_schemas
        self.params: dict[str, _Param] = {}
        self.aliases: dict[str, str] = {}  # local variable → parameter it holds
        self.parents: dict[ast.AST, ast.AST] = {}

    def run(self) -> dict[str, _Param]:
        nodes = list(ast.walk(self.tree))
        for node in nodes:
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        # Source order, so properties appear as the code first reads them.
        nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        for node in nodes:
            self._collect_access(node)
        for node in nodes:
            self._collect_alias(node)
        for node in nodes:
            if isinstance(node, ast.Call):
                self._collect_tool_call(node)
        for node in nodes:
            name = self._param_of(node)
            if name is not None:
                self._collect_usage(node, name)
        return self.params

    # -- parameters ---------------------------------------------------------------

    def _param(self, name: str) -> _Param:
        if name not in self.params:
            self.params[name] = _Param(name=name)
        return self.params[name]

    def _access_name(self, node: ast.AST) -> str | None:
        """The parameter read by this expression, if it is an ``args`` access."""
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and _is_name(node.value, ARGS_NAME)
        ):
            parent = self.parents.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                return None  # a method of args (.get is handled as a call; .items() etc. are not params)
            return node.attr
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_name(node.value, ARGS_NAME)
        ):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
            return None
        if _is_args_get(node):
            assert isinstance(node, ast.Call)
            key = node.args[0]
            assert isinstance(key, ast.Constant) and isinstance(key.value, str)
            return key.value
        return None

    def _collect_access(self, node: ast.AST) -> None:
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _is_name(node.comparators[0], ARGS_NAME)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
        ):
            self._param(node.left.value).optional = True  # `"x" in args`: the code copes without x
            return
        name = self._access_name(node)
        if name is None:
            return
        param = self._param(name)
        if isinstance(node, ast.Call):  # args.get("x"[, default])
            param.optional = True
            default_node = node.args[1] if len(node.args) > 1 else None
            if default_node is None:
                for kw in node.keywords:
                    if kw.arg == "default":
                        default_node = kw.value
            value = _literal(default_node) if default_node is not None else None
            if value is not _MISSING and param.default is _MISSING:
                param.default = value
                param.default_type = _json_type_of(value)

    def _collect_alias(self, node: ast.AST) -> None:
        """``p = args.path`` (or ``p, n = args.p, args.n``): p now stands for the parameter."""
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
                pairs.extend(zip(target.elts, value.elts, strict=False))
            else:
                pairs.append((target, value))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs.append((node.target, node.value))
        for target, value in pairs:
            name = self._access_name(value)
            if isinstance(target, ast.Name) and name is not None:
                self.aliases.setdefault(target.id, name)

    def _param_of(self, node: ast.AST) -> str | None:
        """The parameter an expression evaluates to: a direct access or an alias variable."""
        name = self._access_name(node)
        if name is not None:
            return name
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self.aliases.get(node.id)
        return None

    # -- types --------------------------------------------------------------------

    def _collect_tool_call(self, call: ast.Call) -> None:
        tool_id = _mcp_tool_id(call.func)
        if tool_id is None:
            return
        schema = self._tool_schema(tool_id)
        properties = schema.get("properties") if schema else None
        if not isinstance(properties, Mapping):
            return
        flows: list[tuple[str, ast.expr]] = [(kw.arg, kw.value) for kw in call.keywords if kw.arg]
        # Also the single-dict style: mcp.fs.read({"path": args.path}).
        if call.args and isinstance(call.args[0], ast.Dict):
            for key, value in zip(call.args[0].keys, call.args[0].values, strict=False):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    flows.append((key.value, value))
        for keyword, value in flows:
            name = self._param_of(value)
            prop = properties.get(keyword)
            if name is None or not isinstance(prop, Mapping):
                continue
            param = self._param(name)
            if param.tool_type is None and "type" in prop:
                param.tool_type = prop["type"]
                description = prop.get("description")
                param.tool_description = description if isinstance(description, str) else None

    def _tool_schema(self, tool_id: str) -> Mapping[str, Any] | None:
        entry = self.tool_schemas.get(tool_id)
        if entry is None:  # `mcp.google_maps.search` names `google-maps:search`
            entry = next(
                (v for k, v in self.tool_schemas.items() if tool_ids.same_python_name(k, tool_id)),
                None,
            )
        if entry is None:
            return None
        nested = entry.get("input_schema")
        return nested if isinstance(nested, Mapping) else entry

    def _collect_usage(self, node: ast.AST, name: str) -> None:
        parent = self.parents.get(node)
        found: str | None = None
        if isinstance(parent, ast.Compare):
            others = [parent.left, *parent.comparators]
            membership = any(isinstance(op, ast.In | ast.NotIn) for op in parent.ops)
            for other in others:
                if other is not node and not membership:
                    found = found or _literal_type(other, allow_none=False)
        elif isinstance(parent, ast.BinOp):
            other = parent.right if parent.left is node else parent.left
            found = _literal_type(other, allow_none=False)
            if found not in {"integer", "number", "string"}:
                found = None
        elif (
            isinstance(parent, ast.Call) and _is_name(parent.func, "range") and node in parent.args
        ):
            found = "integer"
        elif isinstance(parent, ast.For | ast.comprehension) and parent.iter is node:
            found = "array"
        elif isinstance(parent, ast.Attribute) and isinstance(self.parents.get(parent), ast.Call):
            if parent.attr in _STR_METHODS:
                found = "string"
            elif parent.attr in _LIST_METHODS:
                found = "array"
        if found is not None:
            self._param(name).usage_types.append(found)


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_args_get(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and _is_name(node.func.value, ARGS_NAME)
        and len(node.args) >= 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _mcp_tool_id(func: ast.AST) -> str | None:
    """``mcp.server.tool`` → ``server:tool``."""
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Attribute)
        and _is_name(func.value.value, MCP_NAME)
    ):
        return tool_ids.make(func.value.attr, func.attr)
    return None


def _literal(node: ast.AST) -> Any:
    """The JSON-able value of a literal expression, or _MISSING."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING
    return _jsonable(value)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        items = [_jsonable(v) for v in value]
        return _MISSING if any(v is _MISSING for v in items) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        out = {k: _jsonable(v) for k, v in value.items()}
        return _MISSING if any(v is _MISSING for v in out.values()) else out
    return _MISSING  # sets, bytes, complex: no JSON form


def _json_type_of(value: Any) -> str | None:
    if value is None:
        return None  # a None default says "optional", not "null-typed"
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def _literal_type(node: ast.AST, *, allow_none: bool) -> str | None:
    if not isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Dict | ast.UnaryOp):
        return None
    value = _literal(node)
    if value is _MISSING or (value is None and not allow_none):
        return None
    return _json_type_of(value)


def _usage_type(types: list[str]) -> str | None:
    kinds = set(types)
    if kinds == {"integer", "number"}:
        return "number"  # `n > 1` and `n * 0.5`: a number covers both
    return types[0] if len(kinds) == 1 else None  # contradictory hints: say nothing


def _annotation(json_type: Any) -> Any:
    """Python annotation for a JSON Schema ``type`` (a name or a list of names); Any if unknown."""
    names = json_type if isinstance(json_type, list) else [json_type]
    mapped = [_JSON_TO_PY[n] for n in names if isinstance(n, str) and n in _JSON_TO_PY]
    if not mapped or len(mapped) != len(names):
        return Any
    annotation = mapped[0]
    for extra in mapped[1:]:
        annotation = annotation | extra
    return annotation


def _to_json_schema(params: dict[str, _Param]) -> dict[str, Any]:
    # Building a pydantic model is ~1 ms; capabilities share parameter shapes, and the
    # schema is a pure function of them.
    key = repr([astuple(p) for p in params.values()])
    schema = _SCHEMA_CACHE.get(key)
    if schema is None:
        schema = _build_json_schema(params)
        if len(_SCHEMA_CACHE) >= _SCHEMA_CACHE_SIZE:
            _SCHEMA_CACHE.pop(next(iter(_SCHEMA_CACHE)))  # oldest first
        _SCHEMA_CACHE[key] = schema
    return copy.deepcopy(schema)


_SCHEMA_CACHE: dict[str, dict[str, Any]] = {}
_SCHEMA_CACHE_SIZE = 1024


def _build_json_schema(params: dict[str, _Param]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    unknown_defaults: list[str] = []
    for index, param in enumerate(params.values()):
        json_type = param.tool_type or param.default_type or _usage_type(param.usage_types)
        annotation = _annotation(json_type) if json_type is not None else Any
        extra: dict[str, Any] = {"alias": param.name, "title": param.name}
        if param.tool_description:
            extra["description"] = param.tool_description
        if not param.optional:
            fields[f"p{index}"] = (annotation, Field(**extra))
            continue
        default = param.default
        if default is _MISSING:
            unknown_defaults.append(param.name)
            default = None
        if default is None and annotation is not Any:
            annotation = annotation | None  # args.get("x") gives None when x is absent
        fields[f"p{index}"] = (annotation, Field(default=default, **extra))
    # Field names are placeholders: aliases carry the real names, which may be keywords,
    # start with '_' or clash with pydantic's own attributes.
    model = create_model("Parameters", **fields)
    schema = model.model_json_schema(by_alias=True)
    for name in unknown_defaults:
        schema["properties"][name].pop("default", None)  # the code computes it; we cannot say
    return schema


def tools_called(code: str, language: str = "python") -> list[str]:
    """The tool ids (``server:tool``) the code calls as ``mcp.server.tool(...)``, in order."""
    if language != "python":
        found_ts = (
            tool_ids.make(m.group(1) or m.group(2), m.group(3) or m.group(4))
            for m in _TS_TOOL_CALL.finditer(code)
            if (m.group(3) or m.group(4)) != "read_resource"
        )
        return list(dict.fromkeys(found_ts))
    try:
        tree = ast.parse(code.lstrip("\ufeff"))
    except (SyntaxError, ValueError):
        return []
    found = (_mcp_tool_id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call))
    return list(dict.fromkeys(t for t in found if t is not None))


# One tool call as its code makes it: the tool id and, sorted, each parameter passed with
# where its value comes from: "arg" (the caller's args), a literal's JSON text, or "expr"
# (computed; ``**`` for a spread whose names the code alone cannot tell).
CallShape = tuple[str, tuple[tuple[str, str], ...]]
_TS_LITERAL = re.compile(r"""^(?:"[^"]*"|'[^']*'|-?\d+(?:\.\d+)?|true|false|null)$""")
_TS_ARG_VALUE = re.compile(
    r"^args\s*(?:\?\.|\.)\s*[A-Za-z_$][\w$]*$|^args\s*\[\s*[\"'][^\"']+[\"']\s*\]$"
)


def call_signature(code: str, language: str = "python") -> tuple[CallShape, ...]:
    """Every ``mcp.server.tool(...)`` call in source order, with the parameters passed and where
    each comes from: two pieces of code with one signature do one job (see shared.learning)."""
    if language != "python":
        return tuple(_typescript_shapes(code))
    try:
        tree = ast.parse(code.lstrip("\ufeff"))
    except (SyntaxError, ValueError):
        return ()
    calls = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _mcp_tool_id(n.func)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    shapes = []
    for call in calls:
        passed = {(kw.arg or "**", _source(kw.value)) for kw in call.keywords}
        if call.args and isinstance(call.args[0], ast.Dict):  # mcp.fs.read({"path": ...})
            for key, value in zip(call.args[0].keys, call.args[0].values, strict=True):
                name = key.value if isinstance(key, ast.Constant) else "**"
                passed.add((str(name), _source(value)))
        shapes.append((_mcp_tool_id(call.func) or "", tuple(sorted(passed))))
    return tuple(shapes)


def _source(node: ast.AST) -> str:
    """Where a passed value comes from: "arg", a literal's JSON text, or "expr"."""
    if (isinstance(node, ast.Subscript) and _is_name(node.value, ARGS_NAME)) or _is_args_get(node):
        return "arg"
    value = _literal(node)
    return "expr" if value is _MISSING else json.dumps(value, sort_keys=True)


def _typescript_shapes(code: str) -> list[CallShape]:
    shapes = []
    for match in _TS_TOOL_CALL.finditer(code):
        tool = match.group(3) or match.group(4)
        if tool == "read_resource":
            continue
        body = _TS_CALL.match(code, match.start())
        passed = set()
        for entry in _top_level_entries(body.group(5)) if body is not None else []:
            key, colon, value = entry.partition(":")
            if entry.startswith("..."):
                passed.add(("**", "expr"))
            elif not colon:  # shorthand `{ path }`: a variable of the code's
                passed.add((key.strip("\"'"), "expr"))
            else:
                value = value.strip()
                kind = "arg" if _TS_ARG_VALUE.match(value) else None
                if kind is None and _TS_LITERAL.match(value):
                    kind = json.dumps(json.loads(value.replace("'", '"')))
                passed.add((key.strip().strip("\"'"), kind or "expr"))
        shapes.append(
            (tool_ids.make(match.group(1) or match.group(2), tool), tuple(sorted(passed)))
        )
    return shapes


def _top_level_entries(text: str) -> list[str]:
    """An object literal's body split at its top-level commas, each entry stripped."""
    entries: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += (char in "([") - (char in ")]")
        if char == "," and depth == 0:
            entries.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    entries.append("".join(current).strip())
    return [e for e in entries if e]
