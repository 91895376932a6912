"""Every error the gateway returns has one shape: {"error": {"type", "message", "details"?}}."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from shared.errors import AgentCardsError, Conflict, DependencyError, NotFound, ValidationFailed

STATUS_BY_TYPE: dict[type[AgentCardsError], int] = {
    ValidationFailed: 422,
    NotFound: 404,
    Conflict: 409,
    DependencyError: 503,
}


def error_body(type_: str, message: str, details: Any = None) -> dict[str, Any]:
    """The structured error body."""
    error: dict[str, Any] = {"type": type_, "message": message}
    if details is not None:
        error["details"] = details
    return {"error": error}


def install(app: FastAPI) -> None:
    """Register handlers so no route leaks a bare 500 or FastAPI's default shapes."""

    @app.exception_handler(AgentCardsError)
    async def _agentcards(request: Request, exc: AgentCardsError) -> JSONResponse:
        status = next((s for t, s in STATUS_BY_TYPE.items() if isinstance(exc, t)), 500)
        return JSONResponse(error_body(exc.type, exc.message, exc.details or None), status)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {
                "field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"),
                "problem": e.get("msg", ""),
                "type": e.get("type", ""),
            }
            for e in exc.errors()
        ]
        invalid_json = any(p["type"] == "json_invalid" for p in problems)
        message = (
            "request body is not valid JSON"
            if invalid_json
            else "invalid request: "
            + "; ".join(f"{p['field'] or 'body'}: {p['problem']}" for p in problems[:5])
        )
        return JSONResponse(
            error_body("invalid_json" if invalid_json else "validation_error", message, problems),
            400 if invalid_json else 422,
        )
