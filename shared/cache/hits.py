"""Recording a cache hit in one statement: count it on its L2 entry, write the succeeded
execution (no sandbox run) and its audit row, so a hit costs one round trip and one commit.

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

# Hit records are committed without waiting for the WAL flush (synchronous_commit off, this
# transaction only): they are visible to every reader at once, and only a Postgres crash in
# the next ~0.6 s (3 x wal_writer_delay) could lose one. A hit ran nothing, so what such a
# crash loses is that hit's usage and audit row, never a side effect; waiting for the flush
# (~8 ms on the test machines' disks) would cost more than the whole hit.
_RECORD_HIT = """
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
    INSERT INTO executions (tenant_id, code, intent, args, tools, timeout_s, idempotency_key,
                            capability_id, status, result, stdout, extras, started_at,
                            finished_at, duration_ms, queued_ms)
    SELECT %(tenant)s, %(code)s, %(intent)s, %(args)s, %(tools)s, %(timeout)s, %(key)s,
           %(cap)s, %(status)s, %(result)s, %(stdout)s, %(extras)s, now(), now(), 0, 0
      FROM live
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING *
), audit AS (
    INSERT INTO audit_log (tenant_id, key_id, action, execution_id, args_hash, details)
    SELECT %(tenant)s, %(key_id)s, %(action)s, execution.id, %(args_hash)s, %(details)s
      FROM execution
)
SELECT * FROM execution
"""


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
) -> Row | None:
    """The succeeded execution row of this hit (its audit row and the entry's hit count written
    with it), or None when the hit no longer holds (see the module docstring)."""
    details = {"cache_hit": extras["cache_hit"]}
    if capability_id:
        details["capability_id"] = capability_id
    action = AuditAction.CAPABILITY_EXECUTE if capability_id else AuditAction.EXECUTE
    row: Row | None = conn.execute(
        _RECORD_HIT,
        {
            **request_params(request, tenant_id=tenant_id, timeout_s=timeout_s, cap=capability_id),
            "entry": entry_id,
            "servers": list(servers),
            "status": ExecutionStatus.SUCCEEDED,
            "result": Jsonb(result) if result is not None else None,
            "stdout": stdout,
            "extras": Jsonb(extras),
            "key_id": key_id,
            "action": str(action),
            "args_hash": args_hash(
                {"code": request.code, "args": request.args, "tools": request.tools}
            ),
            "details": Jsonb(details),
        },
    ).fetchone()
    return row
