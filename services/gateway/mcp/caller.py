"""Who calls an MCP tool: the HTTP request's principal, or over stdio the configured key's."""

from __future__ import annotations

from anyio import to_thread
from starlette.requests import Request

from services.gateway.auth import principal_of_request, resolve_sync
from services.gateway.state import GatewayState
from shared.auth.principal import ANONYMOUS, Principal


async def request_principal(
    request: object, *, state: GatewayState, stdio_key: str | None
) -> Principal:
    """The caller of an MCP request: the HTTP request's principal (set by the auth layer), or
    over stdio the principal of ``stdio_key`` (AGENTCARDS_API_KEY), re-checked through the
    cache so a revoked key stops working within seconds."""
    if isinstance(request, Request):
        return principal_of_request(request)
    if not state.settings.auth:
        return ANONYMOUS
    return await to_thread.run_sync(lambda: resolve_sync(state.auth, token=stdio_key, state=state))
