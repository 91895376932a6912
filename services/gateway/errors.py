"""Every error the gateway returns has one shape: {"error": {"type", "message", "details"?}}.

REST's handlers live here; MCP's adapter (services/gateway/mcp/errors.py) builds the same body.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import kombu.exceptions
import psycopg
import redis
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from shared.errors import (
    AgentCardsError,
    AuthorizationRequired,
    BodyTooLarge,
    Conflict,
    DependencyError,
    ErrorType,
    Forbidden,
    NotFound,
    PolicyDenied,
    RateLimited,
    ToolNotAllowed,
    Unauthorized,
    ValidationFailed,
    error_dict,
)

log = logging.getLogger(__name__)

RETRY_AFTER_S = 2  # what a 503 tells clients: the dependency probe runs every 0.5 s

STATUS_BY_TYPE: dict[type[AgentCardsError], int] = {
    ValidationFailed: 422,
    ToolNotAllowed: 403,
    AuthorizationRequired: 403,  # not 401: the gateway's own sign-in is fine
    PolicyDenied: 403,
    NotFound: 404,
    Conflict: 409,
    BodyTooLarge: 413,
    DependencyError: 503,
    Unauthorized: 401,
    Forbidden: 403,
    RateLimited: 429,
}
# Starlette's own refusals (no route, wrong method, unreadable body) in our vocabulary.
TYPE_BY_STATUS = {
    400: ErrorType.BAD_REQUEST,
    404: ErrorType.NOT_FOUND,
    405: ErrorType.METHOD_NOT_ALLOWED,
    413: ErrorType.BODY_TOO_LARGE,
}


def error_body(type_: str, message: str, details: Any = None) -> dict[str, Any]:
    """The structured error body."""
    return {"error": error_dict(type_, message, details=details)}


def error_response(exc: AgentCardsError) -> JSONResponse:
    """The envelope and status for one of our errors."""
    status, headers = error_status(exc)
    return JSONResponse(
        error_body(exc.type, exc.message, exc.details or None), status, headers=headers
    )


def error_status(exc: AgentCardsError) -> tuple[int, dict[str, str]]:
    """The HTTP status and headers one of our errors is answered with (REST's and /mcp's)."""
    status = next((s for t, s in STATUS_BY_TYPE.items() if isinstance(exc, t)), 500)
    headers = {}
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_S)
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="agentcards"'
    elif isinstance(exc, RateLimited):
        headers["Retry-After"] = str(exc.retry_after_s)
    return status, headers


def unavailable_response(name: str, error: str) -> JSONResponse:
    """503 + Retry-After in our envelope: a dependency is down; the request did nothing."""
    return JSONResponse(
        {"error": unavailable_error(name, error)}, 503, headers={"Retry-After": str(RETRY_AFTER_S)}
    )


def unavailable_error(name: str, error: str) -> dict[str, Any]:
    return error_dict(
        ErrorType.UNAVAILABLE,
        f"{name} is unavailable ({error}); retry after {RETRY_AFTER_S}s — resubmitting "
        "an execution with the same idempotency_key never runs it twice",
        details={"dependency": name},
    )


# Connection-level failures of a dependency (while the probe has not noticed yet).
_OUTAGES: tuple[tuple[type[Exception], str], ...] = (
    (redis.RedisError, "redis"),
    (psycopg.OperationalError, "postgres"),  # includes psycopg_pool.PoolTimeout
    (kombu.exceptions.OperationalError, "redis"),  # the task broker
)
OUTAGES: tuple[type[Exception], ...] = tuple(kind for kind, _ in _OUTAGES)


def outage_of(exc: Exception) -> tuple[str, str]:
    """The dependency an outage error is about, and what went wrong."""
    name = next(n for t, n in _OUTAGES if isinstance(exc, t))
    if isinstance(exc, redis.exceptions.MaxConnectionsError):  # busy, not down
        return name, (
            "the gateway is at capacity: every connection it keeps to Redis is in use by "
            "requests waiting on results"
        )
    return name, f"{type(exc).__name__}: {str(exc)[:200]}"


def validation_problems(errors: Sequence[Any]) -> list[dict[str, str]]:
    """Pydantic's errors as ``{field, problem, type}``; a NUL's path inside a field extends it."""
    problems = []
    for e in errors:
        loc = [p for p in e.get("loc", ()) if p != "body"]
        loc += (e.get("ctx") or {}).get("path") or []
        problems.append(
            {
                "field": ".".join(str(p) for p in loc),
                "problem": e.get("msg", ""),
                "type": e.get("type", ""),
            }
        )
    return problems


def problems_message(problems: list[dict[str, str]]) -> str:
    """One line naming up to five bad fields."""
    return "invalid request: " + "; ".join(
        f"{p['field'] or 'body'}: {p['problem']}" for p in problems[:5]
    )


def install(app: FastAPI) -> None:
    """Register handlers so no route leaks a bare 500 or FastAPI's default shapes."""

    @app.exception_handler(AgentCardsError)
    async def _agentcards(request: Request, exc: AgentCardsError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        type_ = TYPE_BY_STATUS.get(exc.status_code, ErrorType.BAD_REQUEST)
        message = (
            f"no route {request.method} {request.url.path}: see /docs for the API"
            if exc.status_code == 404
            else f"{request.method} is not allowed on {request.url.path}: see /docs"
            if exc.status_code == 405
            else str(exc.detail)
        )
        return JSONResponse(
            error_body(type_, message), exc.status_code, headers=dict(exc.headers or {})
        )

    async def _outage_response(request: Request, exc: Exception) -> JSONResponse:
        name, error = outage_of(exc)
        log.warning("%s failed on %s %s: %s", name, request.method, request.url.path, exc)
        return unavailable_response(name, error)

    for kind in OUTAGES:
        app.add_exception_handler(kind, _outage_response)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(
            error_body(ErrorType.INTERNAL_ERROR, "internal error; the gateway log has details"),
            500,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = validation_problems(exc.errors())
        invalid_json = any(p["type"] == "json_invalid" for p in problems)
        message = "request body is not valid JSON" if invalid_json else problems_message(problems)
        return JSONResponse(
            error_body(
                ErrorType.INVALID_JSON if invalid_json else ErrorType.VALIDATION_ERROR,
                message,
                problems,
            ),
            400 if invalid_json else 422,
        )
