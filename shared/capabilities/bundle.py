"""Capabilities moved between installs: a versioned JSON bundle out, validated and merged in.

A bundle holds each capability's code, intent, aliases, tools (and those whose calls needed
a person's approval), parameter schema, source, version, family and stats. Ids are the exporting install's: import makes new ones, keeps
families together and merges code the tenant already has (same code hash) instead of
doubling it. What an install derives (embeddings, graph community, PageRank) stays out.
Export → import into an empty tenant → export gives the same bundle but for ``id``,
``family`` and ``exported_at``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import psycopg
from pydantic import Field

from shared.capabilities import lifecycle, store
from shared.capabilities.listing import ITEM_SELECT
from shared.capabilities.normalize import code_hash
from shared.capabilities.twins import twin_head
from shared.embeddings import Embeds, embed_cached
from shared.inputs import SQL_INT_MAX, RequestModel

Conn = psycopg.Connection[Any]
Row = dict[str, Any]

FORMAT = "agentcards.capabilities"
FORMAT_VERSION = 1


class BundleStats(RequestModel):
    """How a capability fared where it was exported from."""

    usage_count: int = Field(ge=0, le=SQL_INT_MAX)
    success_count: int = Field(ge=0, le=SQL_INT_MAX)
    failure_count: int = Field(ge=0, le=SQL_INT_MAX)
    success_rate: float = Field(ge=0.0, le=1.0)
    avg_duration_ms: float = Field(ge=0.0)
    created_at: datetime
    last_used: datetime | None = None
    promoted_at: datetime | None = None


class BundleCapability(RequestModel):
    """One capability of a bundle."""

    id: str = Field(min_length=1, max_length=100, description="its id in the exporting install")
    family: str = Field(min_length=1, max_length=100, description="the id its version 1 had there")
    name: str = Field(min_length=1, max_length=64)
    description: str = Field(max_length=10_000)
    code: str = Field(min_length=1, max_length=1_000_000)
    intent: str = Field(min_length=1, max_length=2000)
    aliases: list[str] = Field(default_factory=list, max_length=1000)
    tools_used: list[str] = Field(default_factory=list, max_length=1000)
    approval_tools: list[str] = Field(
        default_factory=list,
        max_length=1000,
        description="tools whose calls needed a person's approval in its runs (server:tool); "
        "the importing install's policies still decide every call",
    )
    parameters_schema: dict[str, Any]
    source: Literal["emergent", "manual"]
    version: int = Field(ge=1, le=SQL_INT_MAX)
    stats: BundleStats
    language: Literal["python", "typescript"] = "python"  # bundles made before it: Python


class Bundle(RequestModel):
    """``GET /v1/capabilities/export`` and ``POST /v1/capabilities/import``."""

    format: Literal["agentcards.capabilities"]
    format_version: Literal[1]
    exported_at: datetime | None = None
    capabilities: list[BundleCapability] = Field(max_length=10_000)


_EXPORT_SELECT = ITEM_SELECT.replace(
    "c.community AS community_id,",
    "c.community AS community_id, coalesce(c.family_id, c.id)::text AS family, "
    "c.success_count, c.failure_count, c.avg_duration_ms, c.promoted_at,",
)


def export_bundle(conn: Conn, *, tenant_id: str, ids: list[str] | None) -> Row:
    """The tenant's capabilities (these ids, or all) as a bundle; in name, version order."""
    where, params = "c.tenant_id = %s", [tenant_id]
    if ids is not None:
        where += " AND c.id::text = ANY(%s)"
        params.append(ids)  # type: ignore[arg-type]
    rows = conn.execute(
        f"{_EXPORT_SELECT} WHERE {where} ORDER BY c.name, c.version, c.code", params
    ).fetchall()
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": _iso(datetime.now(UTC)),
        "capabilities": [_entry(r) for r in rows],
    }


# A bundle entry's fields as stored, then its stats (timestamps as ISO 8601 text).
_ENTRY_FIELDS = (
    "id", "family", "name", "description", "code", "intent", "aliases", "tools_used",
    "approval_tools", "parameters_schema", "source", "version", "language",
)  # fmt: skip
_TIME_FIELDS = ("created_at", "last_used", "promoted_at")
_STATS_FIELDS = tuple(f for f in BundleStats.model_fields if f not in _TIME_FIELDS)


def _entry(row: Row) -> Row:
    return {
        **{f: row[f] for f in _ENTRY_FIELDS},
        "aliases": list(row["aliases"]),
        "approval_tools": list(row["approval_tools"] or []),
        "stats": {**{f: row[f] for f in _STATS_FIELDS}, **{f: _iso(row[f]) for f in _TIME_FIELDS}},
    }


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


# What an imported entry brings as it is.
_COPIED = {
    "code", "intent", "name", "description", "parameters_schema", "tools_used", "source",
    "language",
}  # fmt: skip


def import_bundle(conn: Conn, *, tenant_id: str, bundle: Bundle, embedder: Embeds) -> list[Row]:
    """Add the bundle's capabilities to the tenant in the caller's transaction; per entry,
    ``{id, name, version, source_id, status}`` with status ``created`` or ``merged``.

    Entries go in (family, version) order. Code the tenant has (same hash) is merged: the
    stats of the more used side, the earliest creation, the latest use, the union of
    aliases; name and version stay. New code making the same tool calls as a capability the
    tenant has (``twins``) is that capability's next version, under its name, inheriting its
    phrasings. A family's later versions join the family its earlier ones joined, at a version
    no lower than the bundle's.
    """
    entries = sorted(bundle.capabilities, key=lambda e: (e.family, e.version, e.name))
    for i, entry in enumerate(bundle.capabilities):
        lifecycle.check_code(entry.code, field=f"capabilities.{i}.code", language=entry.language)
        lifecycle.check_name(entry.name, field=f"capabilities.{i}.name")
    texts = list(dict.fromkeys(t for e in entries for t in (e.intent, *e.aliases)))
    vectors = dict(zip(texts, embed_cached(conn=conn, embedder=embedder, texts=texts), strict=True))
    families: dict[str, str] = {}  # bundle family -> family here
    out: list[Row] = []
    for entry in entries:
        digest = code_hash(entry.code, entry.language)
        known = lifecycle.by_code_hash(conn, tenant_id=tenant_id, code_hash=digest)
        if known is not None:
            _merge(conn, tenant_id=tenant_id, capability_id=known["id"], entry=entry)
            capability_id, status = known["id"], "merged"
            families.setdefault(entry.family, known["family"])
            name, version = known["name"], known["version"]
        else:
            family = families.get(entry.family)
            version, name, twin = entry.version, entry.name, None
            if family is not None:
                version = max(
                    version, lifecycle.family_top(conn, tenant_id=tenant_id, family=family) + 1
                )
            else:
                twin = twin_head(
                    conn, tenant_id=tenant_id, code=entry.code, language=entry.language,
                    tools_used=entry.tools_used,
                )  # fmt: skip
            if twin is not None:  # the tenant's capability doing the same job: its next version
                family, name, version = twin["family"], twin["name"], int(twin["top"]) + 1
            capability_id = lifecycle.insert(
                conn,
                tenant_id=tenant_id,
                values={
                    **entry.model_dump(include=_COPIED),
                    **entry.stats.model_dump(),
                    "code_hash": digest,
                    "vec": vectors[entry.intent],
                    "name": name,
                    "version": version,
                    "family": family,
                },
            )
            if twin is not None:
                store.inherit_phrasings(conn, pairs=[(capability_id, twin["id"])])
            families.setdefault(entry.family, family or capability_id)
            status = "created"
        store.add_approval_tools(conn, tools_by_id={capability_id: entry.approval_tools})
        lifecycle.add_aliases(
            conn,
            tenant_id=tenant_id,
            capability_id=capability_id,
            aliases=[(a, vectors[a]) for a in entry.aliases],
        )
        out.append(
            {"id": capability_id, "name": name, "version": version,
             "source_id": entry.id, "status": status}
        )  # fmt: skip
    return out


def _merge(conn: Conn, *, tenant_id: str, capability_id: str, entry: BundleCapability) -> None:
    """Fold an imported entry's stats into the capability with the same code (idempotent:
    merging the same entry twice changes nothing more)."""
    s = entry.stats
    conn.execute(
        """
        UPDATE capabilities AS c
           SET usage_count = v.usage_count, success_count = v.success_count,
               failure_count = v.failure_count, success_rate = v.success_rate,
               avg_duration_ms = v.avg_duration_ms,
               created_at = least(c.created_at, %(created_at)s),
               last_used = greatest(c.last_used, %(last_used)s),
               promoted_at = coalesce(c.promoted_at, %(promoted_at)s),
               updated_at = now()
          FROM (SELECT CASE WHEN %(usage_count)s > usage_count THEN %(usage_count)s
                            ELSE usage_count END AS usage_count,
                       CASE WHEN %(usage_count)s > usage_count THEN %(success_count)s
                            ELSE success_count END AS success_count,
                       CASE WHEN %(usage_count)s > usage_count THEN %(failure_count)s
                            ELSE failure_count END AS failure_count,
                       CASE WHEN %(usage_count)s > usage_count THEN %(success_rate)s
                            ELSE success_rate END AS success_rate,
                       CASE WHEN %(usage_count)s > usage_count THEN %(avg_duration_ms)s
                            ELSE avg_duration_ms END AS avg_duration_ms
                  FROM capabilities WHERE id::text = %(id)s) AS v
         WHERE c.tenant_id = %(tenant)s AND c.id::text = %(id)s
        """,
        {**s.model_dump(), "id": capability_id, "tenant": tenant_id},
    )
