"""Recording a cache hit in one statement: count it on its L2 entry, write the succeeded
execution (no sandbox run) and its audit row, so a hit costs one round trip and one commit.
An L2 hit also finds its entry in that statement, and its result is copied in SQL (never
decoded and re-encoded here); the caller rolls it back when the entry may not be served.

The statement writes nothing when the entry expired or was invalidated since it was read,
when a server it used is blocked (an invalidation of it failed halfway), or when the
idempotency key was used already: the caller then treats the lookup as a miss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from shared.auth.audit import AuditAction, args_hash
from shared.cache.store import Conn, Row
from shared.executions.models import ExecutionRequest
from shared.executions.status import ExecutionStatus
from shared.executions.store import request_params

# The parts both hit statements share: the succeeded execution row (from the request, finished
# at once, no sandbox run) and its audit row, written only if the execution row was.
_INSERT_EXECUTION = """INSERT INTO executions (tenant_id, code, intent, args, tools, timeout_s,
        idempotency_key, capability_id, learn, status, result, stdout, extras, started_at,
        finished_at, duration_ms, queued_ms, trace_id, language, user_id)"""
_REQUEST_VALUES = """%(tenant)s, %(code)s, %(intent)s, %(args)s, %(tools)s, %(timeout)s,
           %(key)s, %(cap)s, %(learn)s, %(status)s"""
_FINISHED_AT_ONCE = "now(), now(), 0, 0, %(trace)s, %(language)s, %(user)s"
_RETURN_AND_AUDIT = """ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO audit_log (tenant_id, key_id, user_id, action, execution_id, args_hash, details)
    SELECT %(tenant)s, %(key_id)s, %(user)s, %(action)s, execution.id, %(args_hash)s, %(details)s
      FROM execution
)"""

# Hit records are committed without waiting for the WAL flush (synchronous_commit off, this
# transaction only): they are visible to every reader at once, and only a Postgres crash in
# the next ~0.6 s (3 x wal_writer_delay) could lose one. A hit ran nothing, so what such a
# crash loses is that hit's usage and audit row, never a side effect; waiting for the flush
# (~8 ms on the test machines' disks) would cost more than the whole hit.
_RECORD_HIT = f"""
WITH go AS (
    SELECT set_config('synchronous_commit', 'off', true) IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM cache_blocked_servers WHERE server = ANY(%(servers)s))
       AND NOT EXISTS (SELECT 1 FROM executions
                        WHERE tenant_id = %(tenant)s AND idempotency_key = %(key)s) AS ok
), hit AS (
    UPDATE capability_cache SET hit_count = hit_count + 1
     WHERE id = %(entry)s AND expires_at > now() AND (SELECT ok FROM go)
    RETURNING id
), live AS (
    SELECT 1 FROM hit
    UNION ALL SELECT 1 FROM go WHERE ok AND %(entry)s::bigint IS NULL
), execution AS (
    {_INSERT_EXECUTION}
    SELECT {_REQUEST_VALUES}, %(result)s, %(stdout)s, %(extras)s, {_FINISHED_AT_ONCE}
      FROM live
    {_RETURN_AND_AUDIT}
SELECT * FROM execution
"""


# The L2 hit in one statement: the live entry for (tenant, capability, params), counted, copied
# into the succeeded execution and audited; with the entry's tools, servers and generations
# for the caller's allow-list and generation checks, which roll the whole of it back on refusal.
_RECORD_CAPABILITY_HIT = f"""
WITH entry AS (
    SELECT id, result, stdout, tools_used, servers, generations, source_execution_id, created_at
      FROM capability_cache
     WHERE tenant_id = %(tenant)s AND capability_id = %(cap)s AND params_hash = %(params)s
       AND expires_at > now()
), go AS (
    SELECT set_config('synchronous_commit', 'off', true) IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM cache_blocked_servers b, entry
                        WHERE b.server = ANY(entry.servers))
       AND NOT EXISTS (SELECT 1 FROM executions
                        WHERE tenant_id = %(tenant)s AND idempotency_key = %(key)s) AS ok
), hit AS (
    UPDATE capability_cache c SET hit_count = c.hit_count + 1
      FROM entry WHERE c.id = entry.id AND (SELECT ok FROM go)
    RETURNING entry.*
), execution AS (
    {_INSERT_EXECUTION}
    SELECT {_REQUEST_VALUES}, hit.result, hit.stdout,
           jsonb_build_object('cache_hit', %(level)s::text,
                              'cached_at', to_jsonb(hit.created_at) #>> '{{}}',
                              'source_execution_id', hit.source_execution_id::text),
           {_FINISHED_AT_ONCE}
      FROM hit
    {_RETURN_AND_AUDIT}
SELECT execution.*, hit.tools_used AS entry_tools_used, hit.servers AS entry_servers,
       hit.generations AS entry_generations
  FROM execution, hit
"""

ENTRY_FIELDS = ("entry_tools_used", "entry_servers", "entry_generations")


def record_capability_hit(
    conn: Conn,
    *,
    request: ExecutionRequest,
    timeout_s: float,
    tenant_id: str,
    key_id: str | None,
    capability_id: str,
    params_hash: str,
    level: str,
    user_id: str | None = None,
) -> tuple[Row, Row] | None:
    """The succeeded execution row of an L2 hit and its entry's ``tools_used``, ``servers`` and
    ``generations``; None on a miss (no live entry, a blocked server, a used idempotency key).

    Uncommitted: the caller commits only when the entry may be served to this caller, and
    rolls back otherwise, so a refused hit is neither counted nor recorded.
    """
    row: Row | None = conn.execute(
        _RECORD_CAPABILITY_HIT,
        {
            **request_params(
                request, tenant_id=tenant_id, timeout_s=timeout_s, cap=capability_id, user=user_id
            ),
            "params": params_hash,
            "status": ExecutionStatus.SUCCEEDED,
            "level": level,
            **_audit_params(request, key_id=key_id, capability_id=capability_id, level=level),
        },
    ).fetchone()
    if row is None:
        return None
    entry = {name.removeprefix("entry_"): row.pop(name) for name in ENTRY_FIELDS}
    return row, entry


def _audit_params(
    request: ExecutionRequest, *, key_id: str | None, capability_id: str | None, level: str
) -> dict[str, Any]:
    details = {"cache_hit": level}
    if capability_id:
        details["capability_id"] = capability_id
    action = AuditAction.CAPABILITY_EXECUTE if capability_id else AuditAction.EXECUTE
    return {
        "key_id": key_id,
        "action": str(action),
        "args_hash": args_hash(
            {"code": request.code, "args": request.args, "tools": request.tools}
        ),
        "details": Jsonb(details),
    }


def record_hit(
    conn: Conn,
    *,
    request: ExecutionRequest,
    timeout_s: float,
    tenant_id: str,
    key_id: str | None,
    capability_id: str | None,
    entry_id: int | None,
    servers: Sequence[str],
    result: Any,
    stdout: str,
    extras: dict[str, Any],
    user_id: str | None = None,
) -> Row | None:
    """The succeeded execution row of this hit (its audit row and the entry's hit count written
    with it), or None when the hit no longer holds (see the module docstring)."""
    row: Row | None = conn.execute(
        _RECORD_HIT,
        {
            **request_params(
                request, tenant_id=tenant_id, timeout_s=timeout_s, cap=capability_id, user=user_id
            ),
            "entry": entry_id,
            "servers": list(servers),
            "status": ExecutionStatus.SUCCEEDED,
            "result": Jsonb(result) if result is not None else None,
            "stdout": stdout,
            "extras": Jsonb(extras),
            **_audit_params(
                request, key_id=key_id, capability_id=capability_id, level=extras["cache_hit"]
            ),
        },
    ).fetchone()
    return row
