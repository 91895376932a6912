"""Liveness and readiness: is Postgres (with pgvector) and Redis reachable right now."""

from __future__ import annotations

from typing import Any

import redis
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from services.gateway.deps import State

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Health of the gateway and the servers it depends on")
def healthz(state: State) -> JSONResponse:
    """200 when Postgres and Redis answer; 503 naming each failing part otherwise."""
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
    failing = [name for name, check in checks.items() if not check["ok"]]
    body = {"status": "ok" if not failing else "unavailable", "failing": failing, "checks": checks}
    return JSONResponse(body, status_code=503 if failing else 200)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip(": ")
