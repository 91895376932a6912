"""Every error the gateway returns has one shape: {"error": {"type", "message", "details"?}}."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from shared.errors import (
    AgentCardsError,
    Conflict,
    DependencyError,
    ErrorType,
    NotFound,
    ValidationFailed,
    error_dict,
)

STATUS_BY_TYPE: dict[type[AgentCardsError], int] = {
    ValidationFailed: 422,
    NotFound: 404,
    Conflict: 409,
    DependencyError: 503,
}


def error_body(type_: str, message: str, details: Any = None) -> dict[str, Any]:
    """The structured error body."""
    return {"error": error_dict(type_, message, details=details)}


def mcp_error(exc: AgentCardsError | ValidationError) -> ToolError:
    """The MCP tools' failure: the same ``{type, message, details?}`` as REST, as the error's text."""
    body = (
        exc.to_dict()
        if isinstance(exc, AgentCardsError)
        else error_dict(ErrorType.VALIDATION_ERROR, str(exc))
    )
    return ToolError(json.dumps(body, default=str))


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
            error_body(
                ErrorType.INVALID_JSON if invalid_json else ErrorType.VALIDATION_ERROR,
                message,
                problems,
            ),
            400 if invalid_json else 422,
        )
