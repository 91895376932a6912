"""Capability management as the gateway serves it: one item's JSON, and announcing a change."""

from __future__ import annotations

from typing import Any

from services.gateway.state import GatewayState
from shared.events import bus

Row = dict[str, Any]


def item_json(row: Row) -> Row:
    """An item with its timestamps as ISO 8601 text."""
    return {
        **row,
        "last_used": row["last_used"].isoformat() if row["last_used"] else None,
        "created_at": row["created_at"].isoformat(),
    }


def announce(state: GatewayState, tenant_id: str, kind: bus.EventType, row: Row) -> None:
    bus.publish(state.redis, tenant_id=tenant_id, type=kind, data=bus.capability_event(row))
