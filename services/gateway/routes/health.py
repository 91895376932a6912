"""Readiness: Postgres (with pgvector), Redis and a ready toolhost; each MCP server's state."""

from __future__ import annotations

from typing import Any

import redis
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.gateway.deps import State
from shared.rpc.heartbeat import toolhost_health

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Health of the gateway and the servers it depends on")
def healthz(state: State) -> JSONResponse:
    """200 when Postgres, Redis and a toolhost are ready; 503 naming each failing part otherwise.

    MCP servers that failed do not make it 503 (the rest of the stack serves); they are
    listed with their state and last error, and the status reads ``degraded``.
    """
    checks: dict[str, Any] = {}
    try:
        with state.pool.connection(timeout=2) as conn:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
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
                {"name": s.name, "state": s.state, "last_error": s.error}
                for s in toolhost.servers.values()
            ]
        except redis.RedisError as exc:
            checks["toolhost"] = {"ok": False, "error": _short(exc)}
    failing = [name for name, check in checks.items() if not check["ok"]]
    not_ready = [s["name"] for s in servers if s["state"] != "ready"]
    status = "unavailable" if failing else "degraded" if not_ready else "ok"
    body = {"status": status, "failing": failing, "checks": checks, "mcp_servers": servers}
    return JSONResponse(body, status_code=503 if failing else 200)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip(": ")
