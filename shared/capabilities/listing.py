"""A tenant's capabilities as the dashboard and the CLI list them: filters, sort, one item shape.

``ITEM_FIELDS`` is a contract (``GET /api/capabilities``, the dashboard's explorer and code
panel): each item holds exactly these keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

ITEM_FIELDS = (
    "id", "name", "description", "code", "intent", "aliases", "tools_used", "approval_tools",
    "parameters_schema", "success_rate", "usage_count", "last_used", "created_at",
    "community_id", "version", "versions", "source", "disabled", "language",
)  # fmt: skip

# A family is a capability and its versions (``family_id`` names the first; None: itself).
_FAMILY = "coalesce({t}.family_id, {t}.id)"
# The latest version of its family: no later version of the same family.
LATEST_ONLY = (
    "NOT EXISTS (SELECT 1 FROM capabilities AS n WHERE n.tenant_id = c.tenant_id "
    f"AND n.version > c.version AND {_FAMILY.format(t='n')} = {_FAMILY.format(t='c')})"
)

# One row per capability, its aliases oldest first; ``c`` is the capabilities table.
ITEM_SELECT = """
SELECT c.id::text AS id, c.name, c.description, c.code, c.intent,
       coalesce((SELECT array_agg(a.intent ORDER BY a.id) FROM capability_aliases AS a
                  WHERE a.capability_id = c.id), '{}') AS aliases,
       c.tools_used, c.approval_tools, c.parameters_schema, c.success_rate, c.usage_count, c.last_used,
       c.created_at, c.community AS community_id, c.version,
       (SELECT count(*) FROM capabilities AS v WHERE v.tenant_id = c.tenant_id
           AND coalesce(v.family_id, v.id) = coalesce(c.family_id, c.id))::int AS versions,
       c.source,
       c.disabled_at IS NOT NULL AS disabled, c.language
  FROM capabilities AS c
"""


class Sort(StrEnum):
    """Orders of ``GET /api/capabilities``, each highest (or latest) first."""

    USAGE = "usage"
    SUCCESS_RATE = "success_rate"
    LAST_USED = "last_used"
    CREATED_AT = "created_at"


# Fixed SQL per sort: never formatted from input. Ties fall back to usage, then id.
_ORDER = {
    Sort.USAGE: "c.usage_count DESC, c.success_rate DESC",
    Sort.SUCCESS_RATE: "c.success_rate DESC, c.usage_count DESC",
    Sort.LAST_USED: "c.last_used DESC NULLS LAST, c.usage_count DESC",
    Sort.CREATED_AT: "c.created_at DESC, c.usage_count DESC",
}


@dataclass(frozen=True)
class CapabilityFilter:
    """What ``GET /api/capabilities`` narrows by; None leaves a filter out."""

    community_id: int | None = None
    min_success_rate: float | None = None
    min_usage: int | None = None
    q: str | None = None  # in name, description, intent or an alias, any case
    server: str | None = None  # uses a tool of this server
    tool: str | None = None  # uses this tool (``server:tool``, or the tool name alone)


def _where(f: CapabilityFilter) -> tuple[str, dict[str, Any]]:
    clauses = ["c.tenant_id = %(tenant)s"]
    params: dict[str, Any] = {}
    if f.community_id is not None:
        clauses.append("c.community = %(community)s")
        params["community"] = f.community_id
    if f.min_success_rate is not None:
        clauses.append("c.success_rate >= %(rate)s")
        params["rate"] = f.min_success_rate
    if f.min_usage is not None:
        clauses.append("c.usage_count >= %(usage)s")
        params["usage"] = f.min_usage
    if f.q:
        clauses.append(
            "(c.name ILIKE %(q)s OR c.description ILIKE %(q)s OR c.intent ILIKE %(q)s "
            "OR EXISTS (SELECT 1 FROM capability_aliases AS a "
            "WHERE a.capability_id = c.id AND a.intent ILIKE %(q)s))"
        )
        params["q"] = "%" + _escape_like(f.q) + "%"
    if f.server:
        clauses.append(
            "EXISTS (SELECT 1 FROM jsonb_array_elements_text(c.tools_used) AS u(t) "
            "WHERE split_part(u.t, ':', 1) = %(server)s)"
        )
        params["server"] = f.server
    if f.tool:
        clauses.append(
            "EXISTS (SELECT 1 FROM jsonb_array_elements_text(c.tools_used) AS u(t) "
            "WHERE u.t = %(tool)s OR substr(u.t, strpos(u.t, ':') + 1) = %(tool)s)"
        )
        params["tool"] = f.tool
    return " AND ".join(clauses), params


def list_items(
    conn: Conn, *, tenant_id: str, filters: CapabilityFilter, sort: Sort, limit: int, offset: int
) -> tuple[list[Row], int]:
    """One page of the tenant's capabilities matching ``filters`` in ``sort`` order, one item
    per capability (its latest version; ``versions`` says how many it has); and the number
    matching in all."""
    where, params = _where(filters)
    where = f"{where} AND {LATEST_ONLY}"
    params |= {"tenant": tenant_id, "limit": limit, "offset": offset}
    rows = conn.execute(
        f"{ITEM_SELECT} WHERE {where} ORDER BY {_ORDER[sort]}, c.id LIMIT %(limit)s OFFSET %(offset)s",
        params,
    ).fetchall()
    total = conn.execute(f"SELECT count(*) AS n FROM capabilities AS c WHERE {where}", params)
    found = total.fetchone()
    return [item(r) for r in rows], int(found["n"]) if found else 0


def items_by_id(conn: Conn, *, tenant_id: str, ids: Sequence[str]) -> list[Row]:
    """The tenant's capabilities with these ids (others' ids are simply absent), by version."""
    rows = conn.execute(
        f"{ITEM_SELECT} WHERE c.tenant_id = %s AND c.id::text = ANY(%s) ORDER BY c.version, c.id",
        (tenant_id, list(ids)),
    ).fetchall()
    return [item(r) for r in rows]


def tenant_items(conn: Conn, *, tenant_id: str) -> list[Row]:
    """Every capability of the tenant, every version, disabled or not; by name, then version."""
    rows = conn.execute(
        f"{ITEM_SELECT} WHERE c.tenant_id = %s ORDER BY c.name, c.version", (tenant_id,)
    ).fetchall()
    return [item(r) for r in rows]


def item(row: Row) -> Row:
    """A row of ``ITEM_SELECT`` as the contract's item: exactly ``ITEM_FIELDS``."""
    return {f: list(row[f]) if f == "aliases" else row[f] for f in ITEM_FIELDS}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
