"""Which capabilities cannot run now: a tool they use is unknown, or its server is down or removed.

Such a capability is still shown (its server may come back) but marked ``degraded``
with the tools it misses, and ranked below every runnable one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg

from shared.graph.edges import CAPABILITY_PREFIX
from shared.tools import store as tools_store


def unavailable_tools(conn: psycopg.Connection[Any], *, tool_ids: Iterable[str]) -> set[str]:
    """The ids among ``tool_ids`` that no available tool has (one indexed lookup)."""
    wanted = sorted({t for t in tool_ids if t and not t.startswith(CAPABILITY_PREFIX)})
    return set(wanted) - tools_store.available_ids(conn, ids=wanted)


def missing_tools(tools_used: Sequence[str] | None, *, unavailable: set[str]) -> list[str]:
    """The tools of one capability that cannot be called now, in its own order."""
    return [t for t in dict.fromkeys(tools_used or []) if t in unavailable]


def mark_availability(
    conn: psycopg.Connection[Any], *, capabilities: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each capability (with ``tools_used``) plus ``degraded`` and ``missing_tools``."""
    unavailable = unavailable_tools(
        conn, tool_ids=(t for c in capabilities for t in (c.get("tools_used") or []))
    )
    out = []
    for cap in capabilities:
        missing = missing_tools(cap.get("tools_used"), unavailable=unavailable)
        out.append({**cap, "degraded": bool(missing), "missing_tools": missing})
    return out
