"""Readiness: Postgres (with pgvector), Redis, a ready toolhost and a live sandbox worker; learning lag."""

from __future__ import annotations

from typing import Any

import redis
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.gateway.rest.deps import State
from shared.executions.liveness import read_sandbox_beats
from shared.learning.lag import learning_lag
from shared.queues import Queue
from shared.rpc.heartbeat import toolhost_health

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Health of the gateway and the servers it depends on")
def healthz(state: State) -> JSONResponse:
    """200 when executions can complete; 503 naming each failing part otherwise.

    That takes Postgres, Redis, a ready toolhost and at least one live sandbox worker
    process. MCP servers that failed do not make it 503 (the rest of the stack serves);
    they are listed with their state and last error, and the status reads ``degraded``.
    ``learning`` is the learning backlog: ``queued`` messages in Redis, and from Postgres
    the finished runs not yet learned from (``behind``) and the oldest one's wait
    (``oldest_s``). A wait past ``AGENTCARDS_LEARNING_STALL_S`` is ``stalled`` and reads
    ``degraded``: executions still complete, but nothing new is learned from them.
    """
    checks: dict[str, Any] = {}
    learning: dict[str, Any] = {}
    try:
        with state.pool.connection(timeout=2) as conn:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
            lag = learning_lag(conn)
        learning = {
            "behind": lag.behind,
            "oldest_s": lag.oldest_s,
            "stalled": lag.stalled(after_s=state.settings.learning_stall_s),
        }
        checks["postgres"] = (
            {"ok": True, "pgvector": row["extversion"]}
            if row
            else {"ok": False, "error": "pgvector extension missing"}
        )
    except Exception as exc:  # any failure here is "postgres is down", reported not raised
        checks["postgres"] = {"ok": False, "error": _short(exc)}
    try:
        state.redis.ping()
        checks["redis"] = {"ok": True}
    except redis.RedisError as exc:
        checks["redis"] = {"ok": False, "error": _short(exc)}
    servers: list[dict[str, Any]] = []
    if checks["redis"]["ok"]:  # else the toolhost's state is unknown, and Redis is the cause
        try:
            toolhost = toolhost_health(state.redis)
            checks["toolhost"] = {"ok": toolhost.ok, "detail": toolhost.detail}
            servers = [
                {"name": s.name, "state": s.state, "last_error": s.error, "down_on": s.down_on}
                for s in toolhost.servers.values()
            ]
        except redis.RedisError as exc:
            checks["toolhost"] = {"ok": False, "error": _short(exc)}
    if checks["redis"]["ok"]:
        try:
            checks["sandbox_workers"] = _sandbox_workers(state.redis)
            learning["queued"] = int(state.redis.llen(Queue.LEARNING.value))
        except redis.RedisError as exc:
            checks["sandbox_workers"] = {"ok": False, "error": _short(exc)}
    failing = [name for name, check in checks.items() if not check["ok"]]
    not_ready = [s["name"] for s in servers if s["state"] != "ready" or s["down_on"]]
    degraded = bool(not_ready) or learning.get("stalled", False)
    status = "unavailable" if failing else "degraded" if degraded else "ok"
    body = {
        "status": status,
        "failing": failing,
        "checks": checks,
        "mcp_servers": servers,
        "learning": learning,
    }
    return JSONResponse(body, status_code=503 if failing else 200)


def _sandbox_workers(client: redis.Redis) -> dict[str, Any]:
    """Live sandbox worker processes (heartbeats gone ~3 s after a process dies)."""
    beats = read_sandbox_beats(client)
    if not beats:
        return {"ok": False, "error": "no live sandbox worker: executions stay queued"}
    return {"ok": True, "processes": len(beats), "busy": sum(1 for b in beats if b.busy)}


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip(": ")
