"""Check arguments against a JSON Schema before anything runs: a capability's parameters
(at submission) and a tool's input schema (in the bridge, before the call leaves the worker).

Top-level only and cheap (no schema compilation): missing required, unknown and mistyped
arguments, named, with the valid ones listed. The downstream server still validates the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.errors import ErrorType, error_dict

# JSON Schema type → the Python types a JSON value of that type decodes to. bool is
# excluded from integer/number explicitly below (True is an int in Python).
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class ArgProblems:
    """What is wrong with a set of arguments; empty when they fit the schema."""

    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    mistyped: dict[str, str] = field(default_factory=dict)  # name → "expected X, got Y"

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.mistyped)

    def message(self) -> str:
        """One sentence per problem kind, saying what to change."""
        parts = []
        if self.missing:
            parts.append(f"missing required argument(s): {', '.join(self.missing)}")
        if self.extra:
            parts.append(f"unknown argument(s): {', '.join(self.extra)}")
        if self.mistyped:
            parts.append(
                "wrong type: " + "; ".join(f"{k} ({v})" for k, v in sorted(self.mistyped.items()))
            )
        return "; ".join(parts) if parts else "arguments are valid"

    def to_dict(self) -> dict[str, Any]:
        return {"missing": self.missing, "extra": self.extra, "mistyped": self.mistyped}


def validate_args(*, schema: dict[str, Any] | None, args: dict[str, Any]) -> ArgProblems:
    """Missing required, unexpected and mistyped top-level arguments for an object schema.

    Extra arguments are rejected unless the schema sets ``additionalProperties`` (true or a
    schema): a typo like ``pth`` would otherwise be silently ignored by the code.
    """
    schema = schema or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = [str(r) for r in schema.get("required") or []]
    missing = [name for name in required if name not in args]
    open_ended = schema.get("additionalProperties") not in (None, False)  # true or a schema
    extra = [] if open_ended else sorted(name for name in args if name not in properties)
    mistyped: dict[str, str] = {}
    for name, value in args.items():
        spec = properties.get(name)
        if not isinstance(spec, dict):
            continue
        expected = _expected_types(spec)
        if expected and not any(_is_type(value, t) for t in expected):
            mistyped[name] = f"expected {' or '.join(expected)}, got {_json_type(value)}"
        elif "enum" in spec and value not in spec["enum"]:
            mistyped[name] = f"expected one of {spec['enum']!r}, got {value!r}"
    return ArgProblems(missing=missing, extra=extra, mistyped=mistyped)


def _expected_types(spec: dict[str, Any]) -> list[str]:
    declared = spec.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [str(t) for t in declared]
    # anyOf/oneOf of simple types (pydantic writes Optional[int] this way).
    options = spec.get("anyOf") or spec.get("oneOf") or []
    found = [
        str(o["type"]) for o in options if isinstance(o, dict) and isinstance(o.get("type"), str)
    ]
    return found if len(found) == len(options) else []


def _is_type(value: Any, json_type: str) -> bool:
    if json_type in {"integer", "number"} and isinstance(value, bool):
        return False
    if json_type == "integer" and isinstance(value, float):
        return value.is_integer()
    python_types = _TYPES.get(json_type)
    return True if python_types is None else isinstance(value, python_types)


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name) and not (name == "number" and isinstance(value, int)):
            return name
    return type(value).__name__


def describe_parameters(schema: dict[str, Any] | None) -> str:
    """The valid arguments, for a message: ``timezone (string, required), limit (integer)``."""
    schema = schema or {}
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in properties.items():
        kinds = _expected_types(spec) if isinstance(spec, dict) else []
        notes = [" or ".join(kinds)] if kinds else []
        if name in required:
            notes.append("required")
        parts.append(f"{name} ({', '.join(notes)})" if notes else name)
    return ", ".join(parts) if parts else "none"


def check_tool_arguments(
    tool: str, schema: Mapping[str, Any] | None, args: dict[str, Any]
) -> dict[str, Any] | None:
    """``invalid_arguments`` naming what is wrong with a call to ``tool`` (None: the call may go).

    A tool that published no schema (or no ``properties``) is not checked: there is nothing
    to name, and its server decides.
    """
    if not schema or not isinstance(schema.get("properties"), dict):
        return None
    as_dict = dict(schema)
    problems = validate_args(schema=as_dict, args=args)
    if problems.ok:
        return None
    return error_dict(
        ErrorType.INVALID_ARGUMENTS,
        f"arguments do not fit {tool}'s input schema: {problems.message()}; "
        f"valid arguments: {describe_parameters(as_dict)}",
        **problems.to_dict(),
    )
