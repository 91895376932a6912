"""Capability management as the gateway serves it: the request and response models, one item's JSON."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from services.gateway.state import GatewayState
from shared.events import bus
from shared.inputs import RequestModel

Row = dict[str, Any]


class CapabilityItem(BaseModel):
    """One capability as the dashboard and the CLI show it (a contract: exactly these keys)."""

    id: str
    name: str
    description: str
    code: str
    intent: str
    aliases: list[str] = Field(description="other phrasings it is matched by")
    tools_used: list[str]
    parameters_schema: dict[str, Any] = Field(description="JSON Schema of its `args`")
    success_rate: float
    usage_count: int
    last_used: str | None = Field(description="ISO 8601; null when never run")
    created_at: str
    community_id: int | None = Field(description="its tool-graph community (Louvain)")
    version: int = Field(description="1, 2, ... within the capabilities of its name")
    source: str = Field(description="`emergent` (learned) or `manual`")


class CapabilityList(BaseModel):
    """`GET /api/capabilities`: one page and how many match in all."""

    capabilities: list[CapabilityItem]
    total: int


class CapabilityCreate(RequestModel):
    """`POST /v1/capabilities`: code and what it does; name, description and aliases optional."""

    code: str = Field(min_length=1, max_length=1_000_000, description="sandbox code, as run")
    intent: str = Field(min_length=1, max_length=2000, description="what it does, one sentence")
    name: str | None = Field(
        default=None,
        description="snake_case; an existing name makes this its next version "
        "(default: derived from the intent)",
    )
    description: str | None = Field(default=None, max_length=10_000)
    aliases: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        default_factory=list, max_length=50, description="other phrasings to match it by"
    )


class CapabilityPatch(RequestModel):
    """`PATCH /v1/capabilities/{id}`: only the fields given change; `aliases` replaces the list."""

    name: str | None = None
    description: str | None = Field(default=None, max_length=10_000)
    intent: str | None = Field(default=None, min_length=1, max_length=2000)
    aliases: list[Annotated[str, Field(min_length=1, max_length=2000)]] | None = Field(
        default=None, max_length=50
    )


class ImportResult(BaseModel):
    """`POST /v1/capabilities/import`: what became of each bundle entry."""

    created: int
    merged: int
    capabilities: list[dict[str, Any]] = Field(
        description="per entry: id (here), name, version, source_id (in the bundle), "
        "status (`created` or `merged`)"
    )


def item_json(row: Row) -> Row:
    """An item with its timestamps as ISO 8601 text."""
    return {
        **row,
        "last_used": row["last_used"].isoformat() if row["last_used"] else None,
        "created_at": row["created_at"].isoformat(),
    }


def announce(state: GatewayState, tenant_id: str, kind: bus.EventType, row: Row) -> None:
    bus.publish(state.redis, tenant_id=tenant_id, type=kind, data=bus.capability_event(row))
