"""The result cache's three stages around the run: prepare before it, invalidate the
servers it may have written before its outcome is stored, remember the stored result."""

from __future__ import annotations

from typing import Any

from shared.cache import runs as cache_runs
from shared.db import autocommit
from shared.executions.status import ExecutionStatus
from shared.sandbox.outcome import ExecutionOutcome
from workers.sandbox import clients
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.retry import with_db_retry


def prepare(ctx: RunContext) -> None:
    """The scope's cache policies (from the tools the scope stage read) and its servers'
    generations, read before the run starts (by the scope stage, with the grant)."""
    capability_id = ctx.row.get("capability_id")

    def read(conn: Any) -> dict[str, Any] | None:
        with autocommit(conn):  # a read only: no BEGIN and COMMIT round trips around it
            return cache_runs.capability_cache_config(conn, capability_id=capability_id)

    # Nothing ran yet: waiting out a Postgres restart is safe.
    config = with_db_retry(read, what="prepare the result cache") if capability_id else None
    scope = ctx.cache_scope
    if scope is None:  # the scope stage did not run (a stage's own test)
        scope = cache_runs.scope_among(ctx.known_tool_rows, tools=ctx.row["tools"])
    # The generations the scope stage read with the grant (None: read them now).
    ctx.cache = cache_runs.prepare(
        ctx.redis, scope=scope, config=config, generations=ctx.generations
    )


def invalidate_writes(ctx: RunContext) -> None:
    """Before the execution is reported finished: what it wrote must not be read back stale.

    Retried, else its servers' entries are blocked; if even that fails this raises, so the
    run ends broken and is stored as failed, never as a success whose writes may be read
    back stale.
    """
    assert ctx.outcome is not None and ctx.cache is not None
    run = finished(ctx.outcome, ctx.outcome.status)
    cache_runs.invalidate_writes(clients.db_pool().connection, ctx.redis, run=run, cache=ctx.cache)


def remember(ctx: RunContext) -> None:
    """Cache the stored outcome where the rules allow; a failed capability run may end its
    cached results (three in a row). Best-effort: the run is stored already."""
    assert ctx.outcome is not None and ctx.cache is not None and ctx.status is not None
    run = finished(ctx.outcome, ctx.status)
    # Values in clear (a key that opted out of PII, on a stack that tokenises) are never
    # served to the tenant's other keys.
    clear = ctx.settings.pii != "off" and ctx.grant is not None and ctx.grant.pii_off
    # With a policy file a cached result is served only when its calls would be permitted
    # now (docs/policy.md); a resource read is decided by its URI, which the entry does not
    # keep, so a run that read any is not cached.
    reads = ctx.settings.policy_file is not None and ctx.outcome.resource_reads > 0
    # The pool rolls back a connection handed back mid-transaction (or drops a lost one).
    with clients.db_pool().connection() as conn:
        if not clear and not reads:
            cache_runs.remember(
                conn, ctx.redis, row=ctx.row, run=run, cache=ctx.cache, settings=ctx.settings
            )
        if run.status != ExecutionStatus.SUCCEEDED:
            cache_runs.after_failure(conn, ctx.redis, row=ctx.row)


def finished(outcome: ExecutionOutcome, status: str) -> cache_runs.Finished:
    """What the cache reads of a run, with the status it ended (or was stored) with."""
    return cache_runs.Finished.of(outcome, status)
