"""First stage: what the run may use: its grant, its tools, the capabilities it inlines."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from shared.auth.grants import GRANT_RUN_SLACK_S, Grant, load_grant
from shared.cache import entries
from shared.cache import runs as cache_runs
from shared.capabilities.references import referenced_capabilities
from shared.capabilities.store import capabilities_by_name
from shared.db import autocommit
from shared.queues import grant_key
from shared.sandbox.bridge import CapabilitySource
from shared.sandbox.tools import ToolSpec
from shared.tools.store import awaiting_servers_at, configured, run_tools_at
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.retry import with_db_retry

log = logging.getLogger(__name__)

# Capabilities reachable from one execution's code (through nested calls) that are
# injected into the child; beyond this the code is refused rather than slowed down.
MAX_INJECTED_CAPABILITIES = 64


def resolve_scope(ctx: RunContext) -> None:
    """Read the grant (and keep it for the run), the granted tools, the inlined capabilities,
    and the result cache's scope with its servers' generations (for ``cache.prepare``)."""
    # One read of `tools` for the scope and the cache settings (cache.prepare), kept in this
    # process while the version the claim read stays: no round trip unless tools changed.
    # Before the grant's read: the grant outlives a queue wait (a day), so a Postgres outage
    # waited out here cannot make it expire.
    ctx.known_tool_rows, ctx.awaiting_servers = with_db_retry(
        lambda conn: _run_tools(conn, version=ctx.tools_version), what="load tools"
    )
    ctx.cache_scope = cache_runs.scope_among(ctx.known_tool_rows, tools=ctx.row["tools"])
    # The grant read, and from now on kept as long as this run (not as long as a queue wait),
    # with the generations of the cache scope's servers, in one round trip: EXPIRE changes
    # nothing when there is no grant; the generations are read before the run starts, as
    # store-then-check needs (shared.cache.entries).
    key, ttl = grant_key(ctx.execution_id), int(ctx.row["timeout_s"]) + GRANT_RUN_SLACK_S
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.get(key)
    pipe.expire(key, ttl)
    keys = entries.queue_generations(pipe, cache_runs.scope_servers(ctx.cache_scope))
    raw, _, *generations = pipe.execute()
    ctx.generations = entries.generations_replied(keys, generations)
    ctx.grant = load_grant(raw)
    if ctx.grant is None:
        log.warning("execution %s has no tool grant record: it may call no tools", ctx.execution_id)
    ctx.tools, ctx.known_tools = tool_scope(ctx.row, ctx.grant, configured(ctx.known_tool_rows))
    ctx.capabilities = capability_sources(ctx.row)


def tool_scope(
    row: dict[str, Any], grant: Grant | None, rows: list[dict[str, Any]]
) -> tuple[dict[str, ToolSpec], list[str]]:
    """The execution's granted tools and every known tool id, of the tools of configured
    servers (``rows``).

    Granted: the row's listed tools (every known tool when none was listed) that its grant
    record allows; no grant record (never written, or expired in the queue) grants nothing.
    """
    listed = None if row["tools"] is None else set(row["tools"])
    granted = {
        r["id"]: ToolSpec(
            id=r["id"],
            description=r["description"],
            input_schema=r["input_schema"],
            pii_kinds=None if r.get("pii") is None else frozenset(r["pii"]["kinds"]),
        )
        for r in rows
        if grant is not None and (listed is None or r["id"] in listed) and grant.allows(r["id"])
    }
    return granted, [r["id"] for r in rows]


def _run_tools(
    conn: psycopg.Connection[dict[str, Any]], *, version: Any
) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """The known tools' rows and the servers awaiting a person's connection, as of ``version``
    (no statement at all while it stays)."""
    with autocommit(conn):  # one read: no BEGIN and COMMIT round trips around it
        return run_tools_at(conn, version=version), awaiting_servers_at(conn, version=version)


def capability_sources(row: dict[str, Any]) -> dict[str, CapabilitySource]:
    """The capabilities the code calls, and those they call, by name, for inline injection
    (those of the run's language: a TypeScript run inlines TypeScript capabilities)."""

    language = row.get("language") or "python"

    def load(conn: psycopg.Connection[dict[str, Any]]) -> dict[str, CapabilitySource]:
        wanted = referenced_capabilities(row["code"], language)
        found: dict[str, CapabilitySource] = {}
        while wanted and len(found) < MAX_INJECTED_CAPABILITIES:
            rows = capabilities_by_name(conn, tenant_id=row["tenant_id"], names=sorted(wanted))
            wanted = set()
            for cap in rows:
                if (cap.get("language") or "python") != language:
                    continue  # inlined code runs in the caller's runtime: same language only
                found[cap["name"]] = CapabilitySource(id=str(cap["id"]), code=cap["code"])
                wanted |= referenced_capabilities(cap["code"], language)
            wanted -= set(found)
        return found

    return with_db_retry(load, what="load capabilities")
