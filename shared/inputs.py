"""What every request must satisfy before it is parsed or stored: no NUL in text, bounded nesting and size.

PostgreSQL text cannot hold NUL, and recursive JSON decoders and walkers die past ~1000
levels; both are checked here, without recursion, so no input reaches either.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from shared.errors import NestingTooDeep, ValidationFailed
from shared.sandbox.child.wire import MAX_DEPTH, ValueTooDeep, WireError, dumps_bounded

# The wire's cap is the one number: the sandbox refuses values (args, results, tool
# arguments) nested deeper than MAX_DEPTH, so the gateway refuses the same at submission.
VALUE_DEPTH = MAX_DEPTH
# The raw body may nest a few levels more than a value: the request object and, over MCP,
# the JSON-RPC message, its params and the tool's arguments wrap the value.
ENVELOPE_DEPTH = 8
BODY_DEPTH = VALUE_DEPTH + ENVELOPE_DEPTH
# A body may hold code and args escaped as JSON: "\u0000" is 6 bytes for 1, so a body
# six times the two caps (plus room for the other fields) can still be a valid request.
ESCAPE_FACTOR = 6
BODY_SLACK = 64 << 10
NUL_ERROR = "nul_character"
# The HTTP server (uvicorn on httptools) refuses a request line over 64 KiB with a bare
# "Invalid HTTP request received", before any of our code runs. A query parameter may
# therefore hold at most this many characters: percent-encoded, a 4-byte character takes
# 12 bytes, so even a request with a path, a server name and one such value stays well
# under the limit, and whatever the API accepts can actually be sent.
REQUEST_TARGET_BYTES = 64 << 10
QUERY_TEXT_MAX = 4096
# The largest whole number a request may carry where it reaches SQL: Postgres' integer, so
# a fuzzed offset of 10**30 is a 422 naming the field, not "bigint out of range".
SQL_INT_MAX = 2**31 - 1

# A JSON string (skipped whole, so brackets inside strings do not count) or a bracket.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def body_bytes_cap(*, code_bytes: int, args_bytes: int) -> int:
    """The largest request body worth reading: any valid submission fits, escaped."""
    return ESCAPE_FACTOR * (code_bytes + args_bytes) + BODY_SLACK


def nesting_exceeds(body: bytes, limit: int = BODY_DEPTH) -> bool:
    """True when the JSON text nests deeper than ``limit``; one pass, no recursion, stops early.

    Invalid JSON is not judged here (the parser reports it); an unterminated string only
    makes the count stricter.
    """
    depth = 0
    for match in _TOKEN.finditer(body):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif token in (b"]", b"}"):
            depth -= 1
    return False


def check_value(value: Any, *, field: str, max_bytes: int) -> None:
    """Refuse a value the sandbox wire would refuse (too deep, too large, not JSON), naming the field."""
    try:
        dumps_bounded(value, max_bytes=max_bytes)
    except ValueTooDeep:
        raise NestingTooDeep(
            f"{field} nests deeper than {VALUE_DEPTH} levels (the sandbox's limit)",
            field=field,
            limit=VALUE_DEPTH,
        ) from None
    except WireError as exc:
        raise ValidationFailed(
            f"{field}: {exc}; the limit is {max_bytes} bytes", field=field, limit=max_bytes
        ) from None


def nul_path(value: Any) -> list[str | int] | None:
    """Where the first NUL character is in a JSON-like value (a key or a string), else None."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and "\x00" in key:
                    return [*path, key.replace("\x00", "\\u0000")]
                stack.append((child, [*path, key]))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, [*path, i]) for i, child in enumerate(item))
    return None


def nul_error(path: list[str | int]) -> PydanticCustomError:
    """The validation error for a NUL; ``path`` (inside the field) lands in the error's ctx."""
    return PydanticCustomError(
        NUL_ERROR, "text must not contain a NUL character (\\u0000)", {"path": path}
    )


class RequestModel(BaseModel):
    """Base of every request body (REST and MCP): unknown fields and NUL anywhere are refused."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: Any, info: ValidationInfo) -> Any:
        path = nul_path(value)
        if path is not None:
            raise nul_error(path)
        return value
