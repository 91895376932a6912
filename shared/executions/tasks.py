"""The ``mcp_tasks`` table: an MCP task is an execution an MCP client polls by a random id.

A task row names its execution, the tenant and the caller that created it, the endpoint and
tool it was created through, and how long it stays readable (``ttl_ms`` from its creation).
A lookup matches the id, the tenant and the caller together, so another tenant's or
caller's task reads exactly like an unknown one; an expired task is gone the same way. The
row itself goes with its execution (``ON DELETE CASCADE``), by the executions' retention.
"""

from __future__ import annotations

import secrets
from typing import Any

from shared.db import DictConnection

Row = dict[str, Any]

# 24 random bytes: 192 bits, URL-safe (the id travels in the Mcp-Name header).
ID_BYTES = 24


def new_task_id() -> str:
    """A task id nobody can guess (nothing of the execution's id is in it)."""
    return secrets.token_urlsafe(ID_BYTES)


def create_task(
    conn: DictConnection,
    *,
    task_id: str,
    execution_id: str,
    tenant_id: str,
    principal: str,
    endpoint: str,
    tool: str,
    ttl_ms: int,
    poll_interval_ms: int,
) -> Row:
    """Record the task (committed by the caller before the client hears its id) and stamp
    its id on the execution."""
    row = conn.execute(
        """
        INSERT INTO mcp_tasks (id, execution_id, tenant_id, principal, endpoint, tool, ttl_ms,
                               poll_interval_ms, expires_at)
        VALUES (%(id)s, %(execution)s, %(tenant)s, %(principal)s, %(endpoint)s, %(tool)s,
                %(ttl)s, %(poll)s, now() + make_interval(secs => %(ttl)s / 1000.0))
        RETURNING *
        """,
        {
            "id": task_id,
            "execution": execution_id,
            "tenant": tenant_id,
            "principal": principal,
            "endpoint": endpoint,
            "tool": tool,
            "ttl": ttl_ms,
            "poll": poll_interval_ms,
        },
    ).fetchone()
    conn.execute("UPDATE executions SET mcp_task_id = %s WHERE id = %s", (task_id, execution_id))
    assert row is not None  # INSERT ... RETURNING
    return row


def find_task(
    conn: DictConnection, *, task_id: str, tenant_id: str, principal: str, endpoint: str
) -> Row | None:
    """The live task ``task_id`` of this caller on this endpoint; None for an unknown,
    expired, another endpoint's, another tenant's or another caller's task alike."""
    return conn.execute(
        """
        SELECT * FROM mcp_tasks
         WHERE id = %s AND tenant_id = %s AND principal = %s AND endpoint = %s
           AND expires_at > now()
        """,
        (task_id, tenant_id, principal, endpoint),
    ).fetchone()


def list_tasks(
    conn: DictConnection,
    *,
    tenant_id: str,
    principal: str,
    endpoint: str,
    after: str | None,
    limit: int,
) -> list[Row] | None:
    """This caller's live tasks on this endpoint, oldest first, each with what its execution's
    row says of its end (``e_status``, ``e_error``, ``e_started_at``, ``e_finished_at``); ``after``: the last task of the previous page (None when that
    task is not one of the caller's live ones: the cursor is invalid)."""
    if after is not None:
        mark = find_task(
            conn, task_id=after, tenant_id=tenant_id, principal=principal, endpoint=endpoint
        )
        if mark is None:
            return None
        since, since_id = mark["created_at"], mark["id"]
    else:
        since, since_id = None, ""
    tasks = conn.execute(
        """
        SELECT t.*, e.status AS e_status, e.error AS e_error, e.started_at AS e_started_at,
               e.finished_at AS e_finished_at
          FROM mcp_tasks t
          JOIN executions e ON e.id = t.execution_id
         WHERE t.tenant_id = %(tenant)s AND t.principal = %(principal)s
           AND t.endpoint = %(endpoint)s AND t.expires_at > now()
           AND (%(since)s::timestamptz IS NULL OR (t.created_at, t.id) > (%(since)s, %(since_id)s))
         ORDER BY t.created_at, t.id
         LIMIT %(limit)s
        """,
        {
            "tenant": tenant_id,
            "principal": principal,
            "endpoint": endpoint,
            "since": since,
            "since_id": since_id,
            "limit": limit,
        },
    ).fetchall()
    return list(tasks)
