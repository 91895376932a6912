"""The cache around one sandbox run, on the worker: what it may reuse before, and after it ends
(before it is reported finished) the invalidation its writes call for and the entries it leaves."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg
import redis

from shared.cache import entries, store
from shared.cache.invalidate import Trigger, invalidate
from shared.cache.keys import execution_digest, params_hash, scope_digest
from shared.cache.policy import (
    Call,
    Decision,
    ToolPolicy,
    decide,
    servers_of,
    tool_cache,
    tool_policy,
    writable_servers,
    written_servers,
)
from shared.config import Settings
from shared.errors import CacheInvalidationFailed
from shared.executions.status import ExecutionStatus
from shared.executions.trace import TraceSummary, summary_of
from shared.sandbox.outcome import ExecutionOutcome
from shared.tools.store import run_tools_at, tools_version

log = logging.getLogger(__name__)
Conn = psycopg.Connection[Any]
Connect = Callable[[], AbstractContextManager[Conn]]

# Backoff between attempts at an invalidation a write calls for (Redis or Postgres restarting
# take a few seconds); the run is reported finished only after this.
RETRY_DELAYS_S = (0.2, 1.0, 3.0)

# A capability that fails this many runs in a row loses its cached results.
FAILURE_STREAK = 3
FAILED = {ExecutionStatus.FAILED, ExecutionStatus.TIMEOUT, ExecutionStatus.WORKER_LOST}


@dataclass(frozen=True, slots=True)
class Scope:
    """The tools an execution may call, as the cache sees them."""

    policies: dict[str, ToolPolicy]
    digest: str  # the schema hashes of the tools in scope (part of the L1 key)


@dataclass(frozen=True, slots=True)
class RunCache:
    """Read before the run: its scope, and each server's generation (see entries.py)."""

    scope: Scope
    generations: dict[str, int]
    capability_config: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Finished:
    """What the cache needs of a finished run."""

    status: str
    result: Any
    stdout: str
    stdout_truncated: bool
    trace: list[dict[str, Any]]

    @classmethod
    def of(cls, outcome: ExecutionOutcome, status: str) -> Finished:
        """What the cache reads of a run, with the status it ended (or was stored) with."""
        return cls(
            status=status,
            result=outcome.result,
            stdout=outcome.stdout,
            stdout_truncated=outcome.stdout_truncated,
            trace=outcome.trace,
        )


def load_scope(conn: Conn, *, tools: list[str] | None) -> Scope:
    """Policies and the L1 scope digest of ``tools`` (every known tool when None): the tools'
    version read now, their rows from this process's copy while that version stays."""
    return scope_among(run_tools_at(conn, version=tools_version(conn)), tools=tools)


def scope_among(known: Sequence[Mapping[str, Any]], *, tools: list[str] | None) -> Scope:
    """``load_scope`` over every known tool's row, read already (``run_tools``, removed
    servers' included), so the worker's policies and digest are the gateway's."""
    wanted = None if tools is None else set(tools)
    return _scope_of({r["id"]: r for r in known if wanted is None or r["id"] in wanted})


def _scope_of(rows: Mapping[str, Mapping[str, Any]]) -> Scope:
    return Scope(
        policies={
            tool_id: tool_policy(annotations=r["annotations"], override=r["cache_override"])
            for tool_id, r in rows.items()
        },
        digest=scope_digest({tool_id: r["schema_hash"] for tool_id, r in rows.items()}),
    )


def capability_policy(
    conn: Conn,
    *,
    tools_used: Sequence[str],
    config: Mapping[str, Any] | None,
    default_ttl_s: int,
    read_only_ttl_s: int,
) -> Decision:
    """Whether a successful run of a capability calling ``tools_used`` would be cached, why
    not, and for how long: the rules ``remember`` applies, with the tools' current policies."""
    tools = list(dict.fromkeys(tools_used))
    return decide(
        status=ExecutionStatus.SUCCEEDED,
        stdout_truncated=False,
        calls=[Call(tool=tool, ok=True) for tool in tools],
        policies=load_scope(conn, tools=tools).policies,
        default_ttl_s=default_ttl_s,
        read_only_ttl_s=read_only_ttl_s,
        capability_config=config or {},
    )


def capability_cache_config(conn: Conn, *, capability_id: Any) -> dict[str, Any] | None:
    """A capability's cache configuration (None: the capability is gone)."""
    found = conn.execute(
        "SELECT cache_config FROM capabilities WHERE id = %s", (capability_id,)
    ).fetchone()
    return dict(found["cache_config"] or {}) if found else None


def may_store(scope: Scope, *, settings: Settings) -> bool:
    """Whether a run of ``scope``'s tools outside a capability could leave an entry: some tool
    of it is cached by ``decide``'s rule (read-only, a TTL), and the level's TTL is not 0.
    When none could, the run needs no lookup (no entry may answer it: an entry left before
    the operator turned its tool's caching off is not served either) and no generations."""
    if settings.cache_ttl_s <= 0:
        return False
    ttl = settings.cache_read_only_ttl_s
    return any(tool_cache(p, read_only_ttl_s=ttl)["cached"] for p in scope.policies.values())


def scope_servers(scope: Scope) -> list[str]:
    """The servers whose generations a run of ``scope`` reads before it starts."""
    return sorted(servers_of(scope.policies))


def prepare(
    client: redis.Redis,
    *,
    scope: Scope,
    config: dict[str, Any] | None,
    generations: dict[str, int] | None = None,
) -> RunCache:
    """Before the sandbox starts: the scope and the generations its servers are at
    (``generations``: as already read for them, with the cache lookup)."""
    if generations is None:
        generations = entries.read_generations(client, scope_servers(scope))
    return RunCache(scope=scope, generations=generations, capability_config=config)


def invalidate_writes(
    connect: Connect, client: redis.Redis, *, run: Finished, cache: RunCache
) -> int:
    """Invalidate every entry that used a server the run may have written; how many.
    Retried; CacheInvalidationFailed when even blocking the servers failed."""
    return invalidate_servers_safely(connect, client, servers=servers_written(run, cache=cache))


def servers_written(run: Finished, *, cache: RunCache) -> list[str]:
    """The servers the run may have written (``invalidate_writes`` invalidates them): none
    for a run of read-only tools, so its caller need not open a connection."""
    summary = summary_of(run.trace)
    policies = cache.scope.policies
    # Without a whole trace, any server the run could write to may have been written.
    if _complete(run, summary):
        return sorted(set(written_servers(_calls(summary), policies)))
    return sorted(set(writable_servers(policies)))


def remember(
    conn: Conn,
    client: redis.Redis,
    *,
    row: Mapping[str, Any],
    run: Finished,
    cache: RunCache,
    settings: Settings,
) -> None:
    """Store the run's result in L1 (and L2 for a capability) where the rules allow."""
    decided = decisions(row=row, run=run, cache=cache, settings=settings)
    if decided is None:
        return
    l1, l2 = decided
    execution_id, tenant_id = str(row["id"]), str(row["tenant_id"])
    if l1.cacheable:
        entries.put_entry(
            client,
            tenant_id=tenant_id,
            digest=execution_digest(
                code=row["code"],
                args=row["args"],
                scope=cache.scope.digest,
                language=row.get("language") or "python",
            ),
            entry=entries.CachedResult(
                result=run.result, stdout=run.stdout, tools_used=list(l1.tools_used),
                cached_at=entries.now(), source_execution_id=execution_id,
                capability_id=str(row["capability_id"]) if row.get("capability_id") else None,
                generations=entries.generations_of(cache.generations, l1.servers),
            ),
            ttl_s=l1.ttl_s,
            servers=l1.servers,
            generations=cache.generations,
        )  # fmt: skip
    if l2 is None:
        return
    if l2.cacheable:
        _put_capability_entry(conn, client, row=row, run=run, decision_ttl=l2.ttl_s,
                              tools=l2.tools_used, servers=l2.servers, cache=cache)  # fmt: skip
    else:
        log.debug("execution %s not cached: %s", execution_id, l2.reason)


def decisions(
    *, row: Mapping[str, Any], run: Finished, cache: RunCache, settings: Settings
) -> tuple[Decision, Decision | None] | None:
    """What ``remember`` decides for the run: L1, and L2 for a capability run (None: its trace
    is incomplete, nothing is cached)."""
    summary = summary_of(run.trace)
    if not _complete(run, summary):
        return None
    calls = _calls(summary)

    def decision(default_ttl_s: int, config: Mapping[str, Any] | None = None) -> Decision:
        return decide(
            status=run.status,
            stdout_truncated=run.stdout_truncated,
            calls=calls,
            policies=cache.scope.policies,
            default_ttl_s=default_ttl_s,
            read_only_ttl_s=settings.cache_read_only_ttl_s,
            capability_config=config,
        )

    l1 = decision(settings.cache_ttl_s)
    if not row.get("capability_id") or cache.capability_config is None:
        return l1, None
    return l1, decision(settings.capability_cache_ttl_s, cache.capability_config)


def remembers(
    *, row: Mapping[str, Any], run: Finished, cache: RunCache, settings: Settings
) -> bool:
    """Whether ``remember`` would store an entry (a caller may skip its connection if not)."""
    decided = decisions(row=row, run=run, cache=cache, settings=settings)
    return decided is not None and any(d is not None and d.cacheable for d in decided)


def _calls(summary: TraceSummary) -> list[Call]:
    return [Call(tool=c.tool, ok=c.ok) for c in summary.tool_calls]


def _complete(run: Finished, summary: TraceSummary) -> bool:
    """The trace names every call (a cancelled run's trace is lost; a long one may be cut)."""
    return run.status != ExecutionStatus.CANCELLED and not summary.truncated


def _put_capability_entry(
    conn: Conn,
    client: redis.Redis,
    *,
    row: Mapping[str, Any],
    run: Finished,
    decision_ttl: int,
    tools: tuple[str, ...],
    servers: tuple[str, ...],
    cache: RunCache,
) -> None:
    """Upsert, commit, then re-check the generations (entries.py explains the order)."""
    entry_id = store.put_entry(
        conn,
        tenant_id=str(row["tenant_id"]),
        capability_id=str(row["capability_id"]),
        params_hash=params_hash(row["args"]),
        result=run.result,
        stdout=run.stdout,
        tools_used=tools,
        servers=servers,
        source_execution_id=str(row["id"]),
        ttl_s=decision_ttl,
        generations=entries.generations_of(cache.generations, servers),
    )
    conn.commit()
    if entry_id is None:
        return
    if not entries.unchanged(client, servers=servers, generations=cache.generations):
        store.delete_entry(conn, entry_id=entry_id)
        conn.commit()


def after_failure(conn: Conn, client: redis.Redis, *, row: Mapping[str, Any]) -> int:
    """A capability whose last three runs failed loses its cached results; how many."""
    capability_id = row.get("capability_id")
    if not capability_id:
        return 0
    statuses = store.latest_statuses(conn, capability_id=str(capability_id), n=FAILURE_STREAK)
    if len(statuses) < FAILURE_STREAK or not all(s in FAILED for s in statuses):
        return 0
    return invalidate(
        conn, client, trigger=Trigger.FAILURES, scope=f"capability:{capability_id}",
        capability_id=str(capability_id),
    )  # fmt: skip


def invalidate_possible_writes(conn: Conn, client: redis.Redis, *, row: Mapping[str, Any]) -> int:
    """A run whose trace is lost (its worker died): every server it could write is invalidated."""
    written = writable_servers(load_scope(conn, tools=row["tools"]).policies)
    return invalidate_servers(conn, client, servers=written)


def invalidate_servers(conn: Conn, client: redis.Redis, *, servers: Iterable[str]) -> int:
    """Invalidate (and unblock) the entries that used any of ``servers``; how many."""
    servers = sorted(set(servers))
    if not servers:
        return 0
    return invalidate(
        conn, client, trigger=Trigger.WRITE, scope="server:" + ",".join(servers), servers=servers,
    )  # fmt: skip


def invalidate_servers_safely(
    connect: Connect,
    client: redis.Redis,
    *,
    servers: Iterable[str],
    delays_s: Sequence[float] = RETRY_DELAYS_S,
) -> int:
    """``invalidate_servers``, retried with backoff; if every attempt fails, the servers are
    blocked (no entry that used them is served until an invalidation of them completes:
    the expiry beat job retries). CacheInvalidationFailed when even that failed."""
    servers = sorted(set(servers))
    if not servers:
        return 0
    error: Exception | None = None
    for delay in (0.0, *delays_s):
        time.sleep(delay)
        try:
            with connect() as conn:
                return invalidate_servers(conn, client, servers=servers)
        except (psycopg.Error, redis.RedisError) as exc:
            error = exc
            log.warning("invalidating %s failed (%s); retrying", servers, exc)
    try:
        with connect() as conn:
            store.block_servers(conn, servers=servers, reason=f"invalidation failed: {error}")
            conn.commit()
    except psycopg.Error as exc:
        raise CacheInvalidationFailed(
            f"cached results of {', '.join(servers)} could be stale and could not be blocked: "
            f"{error}; {exc}",
            servers=servers,
        ) from exc
    log.error("invalidating %s failed; their cached results are blocked: %s", servers, error)
    # Stale entries are unreachable now (blocked, or their generation was bumped): safe.
    return 0
