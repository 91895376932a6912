"""What a decision is asked about, in the engine's entity and context shapes (docs/policy.md).

Pure functions: the caller (a key or a person with their groups), the thing acted on (a
tool with its MCP annotations, a resource, a capability, a language) and the call's
arguments as a Cedar record. The names are the shipped schema's (``schema.cedarschema``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

NAMESPACE = "AgentCards"
# Cedar's Long is a signed 64-bit integer; its decimal has four places and the same range.
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DECIMAL_MAX = Decimal("922337203685477.5807")
# Arguments nested deeper than this are left out: a record as deep as JSON allows is no
# rule anyone writes, and the engine's recursion is not ours to test.
MAX_ARG_DEPTH = 16


class Action(StrEnum):
    """The actions a policy names as ``AgentCards::Action::"<name>"``."""

    CALL_TOOL = "call_tool"
    READ_RESOURCE = "read_resource"
    GET_PROMPT = "get_prompt"
    EXECUTE_CODE = "execute_code"
    EXECUTE_CAPABILITY = "execute_capability"


class Surface(StrEnum):
    """Where a call comes from (``context.surface``)."""

    CODE = "code"  # a script (execute_code)
    DIRECT = "direct"  # a direct MCP tool call, no script
    CAPABILITY = "capability"  # a capability's code run (execute_capability)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who acts: an API key (``key_id``, ``key_name``) or a person (``user``, ``groups``, ``email``)."""

    tenant: str
    key_id: str | None = None
    key_name: str | None = None
    user: str | None = None
    groups: tuple[str, ...] = ()
    email: str | None = None

    def uid(self) -> dict[str, str]:
        """The principal's entity reference; a caller with neither key nor user is the
        tenant's anonymous key (loopback serving without keys)."""
        if self.user is not None:
            return _uid("User", self.user)
        return _uid("Key", self.key_id or f"anonymous:{self.tenant}")

    def entities(self) -> list[dict[str, Any]]:
        """The principal's entity, with its groups as parents (and as entities)."""
        if self.user is not None:
            attrs: dict[str, Any] = {"tenant": self.tenant}
            if self.email:
                attrs["email"] = self.email
            groups = [_uid("Group", g) for g in self.groups]
            return [
                {"uid": self.uid(), "attrs": attrs, "parents": groups},
                *({"uid": g, "attrs": {}, "parents": []} for g in groups),
            ]
        name = self.key_name or ("anonymous" if self.key_id is None else self.key_id)
        return [{"uid": self.uid(), "attrs": {"tenant": self.tenant, "name": name}, "parents": []}]


def tool_entity(tool_id: str, annotations: Mapping[str, Any] | None) -> dict[str, Any]:
    """``AgentCards::Tool::"<server>:<tool>"`` with its annotations; an absent hint takes
    MCP's default (not read-only, destructive, not idempotent, open-world)."""
    server, _, name = tool_id.partition(":")
    hints = annotations or {}
    return {
        "uid": _uid("Tool", tool_id),
        "attrs": {
            "server": server,
            "name": name,
            "read_only": hints.get("readOnlyHint") is True,
            "destructive": hints.get("destructiveHint") is not False,
            "idempotent": hints.get("idempotentHint") is True,
            "open_world": hints.get("openWorldHint") is not False,
        },
        "parents": [],
    }


def resource_entity(uri: str, server: str) -> dict[str, Any]:
    """``AgentCards::Resource::"<uri>"``."""
    return {"uid": _uid("Resource", uri), "attrs": {"server": server}, "parents": []}


def prompt_entity(prompt_id: str, server: str) -> dict[str, Any]:
    """``AgentCards::Prompt::"<server>:<prompt>"``."""
    _, _, name = prompt_id.partition(":")
    return {
        "uid": _uid("Prompt", prompt_id),
        "attrs": {"server": server, "name": name},
        "parents": [],
    }


def plain_entity(kind: str, name: str) -> dict[str, Any]:
    """An entity without attributes (``Capability``, ``Language``)."""
    return {"uid": _uid(kind, name), "attrs": {}, "parents": []}


def cedar_record(args: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments as a Cedar record: integers stay integers, other numbers become
    ``decimal`` (four places), lists become sets, nulls and what Cedar cannot hold are left out."""
    return {k: v for k, v in ((k, _value(v, 1)) for k, v in args.items()) if v is not _SKIP}


_SKIP = object()


def _value(value: Any, depth: int) -> Any:
    if value is None or depth > MAX_ARG_DEPTH:
        return _SKIP
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if _LONG_MIN <= value <= _LONG_MAX else _decimal(value)
    if isinstance(value, float):
        return _decimal(value) if math.isfinite(value) else _SKIP
    if isinstance(value, Mapping):
        items = ((str(k), _value(v, depth + 1)) for k, v in value.items())
        return {k: v for k, v in items if v is not _SKIP}
    if isinstance(value, list | tuple):
        return [v for v in (_value(v, depth + 1) for v in value) if v is not _SKIP]
    return _SKIP


def _decimal(value: float | int) -> Any:
    try:
        exact = Decimal(value).quantize(Decimal("0.0001"))
    except InvalidOperation:
        return _SKIP
    if abs(exact) > _DECIMAL_MAX:
        return _SKIP
    return {"__extn": {"fn": "decimal", "arg": format(exact, "f")}}


def _uid(kind: str, name: str) -> dict[str, str]:
    return {"type": f"{NAMESPACE}::{kind}", "id": name}


def action_uid(action: Action) -> dict[str, str]:
    """``AgentCards::Action::"<action>"``."""
    return _uid("Action", str(action))
