"""Encodes an execution's result as JSON by one strict rule, naming where and what is not JSON.

The rule (also in execute_code's description and docs/architecture.md): dicts, lists,
tuples (become lists), str, int, float, bool and None, and their subclasses; dict keys
must be str or int (an int key becomes its decimal string, as in Python's json). Anything
else (a set, bytes, a datetime, a Decimal, an arbitrary object, NaN or infinity, a
cycle) is refused with :class:`ResultNotJson` instead of being stringified into a
"success" the caller cannot parse back. Stdlib only: it runs inside the sandbox child.
"""

from __future__ import annotations

import math
from typing import Any

from shared.sandbox.child import advice, wire

ROOT = "result"
# What to write instead, for the types agent code returns by mistake most often.
_SET_HINT = "sorted(value) or list(value)"
_BYTES_HINT = "value.decode() or base64.b64encode(value).decode()"
_HINTS = {
    "set": _SET_HINT,
    "frozenset": _SET_HINT,
    "bytes": _BYTES_HINT,
    "bytearray": _BYTES_HINT,
    "datetime": "value.isoformat()",
    "date": "value.isoformat()",
    "time": "value.isoformat()",
    "Decimal": "str(value) or float(value)",
    "UUID": "str(value)",
}
_PATH_KEYS = 12  # a path longer than this (a cycle, deep nesting) is shown with its head only


class ResultNotJson(Exception):
    """Raised when a result holds a value JSON cannot represent; names its path and Python type."""

    def __init__(self, path: str, python_type: str, problem: str) -> None:
        hint = _HINTS.get(python_type)
        super().__init__(
            f"{path} {problem}; a result must be JSON (dict, list, str, int, float, bool, None)"
            + (f": convert it, e.g. {hint}" if hint else "")
        )
        self.path = path
        self.python_type = python_type


class ResultTooLarge(Exception):
    """Raised when a result is larger than its byte budget or nests deeper than the wire allows."""


def encode_result(value: Any, *, max_bytes: int) -> str:
    """Compact JSON text for ``value``; ResultNotJson or ResultTooLarge, in O(max_bytes) work.

    The walk runs first, with its byte budget, so a shared-reference "bomb" or a cycle
    is refused before the C encoder could spend minutes on it.
    """
    _check(value, max_bytes=max_bytes)
    text = wire.encode_value(value)
    if wire.utf8_size(text) > max_bytes:  # escapes can grow strings past the walk's estimate
        raise ResultTooLarge(advice.result_too_large(max_bytes))
    return text


def _check(value: Any, *, max_bytes: int) -> None:
    budget = max_bytes
    # (item, depth, parent entry, key): paths are rebuilt only when something is wrong.
    stack: list[tuple[Any, int, Any, Any]] = [(value, 1, None, None)]
    while stack:
        entry = stack.pop()
        item, depth = entry[0], entry[1]
        if depth > wire.MAX_DEPTH:
            raise ResultTooLarge(
                f"{_path(entry)} nests deeper than {wire.MAX_DEPTH} levels (a cycle?)"
            )
        if isinstance(item, str):
            budget -= len(item) + 2
        elif isinstance(item, bool) or item is None:
            budget -= 4
        elif isinstance(item, int):
            if item.bit_length() > wire.MAX_INT_BITS:
                raise ResultNotJson(_path(entry), "int", "is an integer too large to encode")
            budget -= 1
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ResultNotJson(_path(entry), "float", f"is {item!r}, which JSON cannot hold")
            budget -= 3
        elif isinstance(item, (list, tuple)):
            budget -= len(item) + 2
            stack.extend((child, depth + 1, entry, i) for i, child in enumerate(item))
        elif isinstance(item, dict):
            budget -= 2 * len(item) + 2
            for key, child in item.items():
                if isinstance(key, bool) or not isinstance(key, (str, int)):
                    kind = type(key).__name__
                    raise ResultNotJson(
                        _path(entry), kind, f"has a key of type {kind} ({_short(key)})"
                    )
                budget -= len(key) + 2 if isinstance(key, str) else 8
                stack.append((child, depth + 1, entry, key))
        else:
            kind = type(item).__name__
            article = "an" if kind[:1].lower() in "aeiou" else "a"
            raise ResultNotJson(_path(entry), kind, f"is {article} {kind}")
        if budget < 0:
            raise ResultTooLarge(advice.result_too_large(max_bytes))


def _path(entry: tuple[Any, int, Any, Any]) -> str:
    """``result['a'][2]`` for a walk entry, from its chain of parents."""
    keys = []
    while entry[2] is not None:
        keys.append(entry[3])
        entry = entry[2]
    keys.reverse()
    head = "".join(f"[{_short(k)}]" for k in keys[:_PATH_KEYS])
    return ROOT + head + (f"...({len(keys)} levels)" if len(keys) > _PATH_KEYS else "")


def _short(key: Any) -> str:
    try:
        text = repr(key)
    except Exception:  # agent objects may define a __repr__ that raises
        text = f"<{type(key).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
