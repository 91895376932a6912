"""A request a direct endpoint forwards to its server: the params it sends, and an answer that
asks for input first."""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from services.gateway.mcp import connecting, input_required


def forwarded_params(params: types.RequestParams) -> dict[str, Any]:
    """An MCP request's params as the downstream server gets them (without our ``_meta``)."""
    body = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    body.pop("_meta", None)
    return body


def forwarded_retry(params: types.RequestParams) -> dict[str, Any]:
    """``forwarded_params``, but a retry answering the gateway's own question (the person
    asked to connect the server first, ``connecting.asked``) carries none of it to the server."""
    body = forwarded_params(params)
    if connecting.asked(params) is not None:
        body.pop("requestState", None)
        body.pop("inputResponses", None)
    return body


def input_asked(
    ctx: ServerRequestContext[Any], result: dict[str, Any], what: str
) -> types.InputRequiredResult | None:
    """A 2026-07-28 server's ``InputRequiredResult`` for ``prompts/get`` or ``resources/read``,
    passed through as it asked (its keys; its ``requestState`` is sealed inside ours by the
    endpoint's boundary, bound to this caller and endpoint); None for any other result. A
    2025-11-25 session cannot be handed one: a clear error."""
    if result.get("resultType") != "input_required":
        return None
    if not input_required.applies(ctx.protocol_version):
        raise MCPError(
            code=types.INVALID_REQUEST,
            message=f"{what}: the server asks for input first, which only a 2026-07-28 "
            "client can be asked outside a tool call",
        )
    return types.InputRequiredResult.model_validate(result)
