"""Multi-round trips (MCP 2026-07-28): a downstream server's question reaches a stateless client
as an ``InputRequiredResult``, and the client's retry carries the answer back to the tool.

A 2026-07-28 client cannot be sent a request mid-call. When a tool of the execution behind
``execute_code``, ``execute_capability`` or a direct call asks for sampling or elicitation,
the gateway ends that ``tools/call`` with an ``InputRequiredResult`` holding the question,
while the sandbox keeps waiting on its tool call (within the tool's and the run's own
deadlines: no slot is held longer than the run's ``timeout_s``). The client retries the same
call with ``inputResponses`` and the ``requestState``; the gateway hands each answer to the
waiting tool and waits on the same execution again (which may ask again).

``requestState`` is sealed by the SDK's boundary (AES-256-GCM under a key derived from
``AGENTCARDS_SECRET_KEY``, shared by every gateway process): bound to the method, the tool,
the arguments' digest, the endpoint and the caller's tenant and key, and expiring. Inside it
is our ``Pending`` (execution, tenant, request ids, the tools' deadline), checked again here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, Literal

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import AESGCMRequestStateCodec, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from services.gateway.auth import principal_of_request
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.rpc import upstream
from shared.rpc.upstream import ClientReply, ClientRequest

# The sealed envelope's lifetime; the tool's own deadline (in ``Pending``) usually ends first.
STATE_TTL_S = 600.0
_KEY_LABEL = b"agentcards/mcp-request-state/v1:"


class Pending(BaseModel):
    """What a ``requestState`` stands for: the questions an execution's tools wait on."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    execution_id: str = Field(min_length=1, max_length=64)
    tenant_id: str
    requests: list[str] = Field(min_length=1)
    # The relay request id behind a key of ``requests`` that is the server's own key
    # (absent: the key is the relay id).
    ids: dict[str, str] = Field(default_factory=dict)
    deadline: float = Field(description="Unix time after which no tool waits for the answers")
    # The run's last event the client was already sent (its progress and log lines): the
    # retry goes on after it instead of sending them again.
    heard: int = Field(default=0, ge=0)


class _SecretCodec:
    """The SDK's AES-GCM codec under a key derived from the gateway secret, built on first use
    (the MCP server is built before the gateway's settings are loaded into its state)."""

    def __init__(self, secret: Callable[[], str]) -> None:
        self._secret = secret
        self._codec: AESGCMRequestStateCodec | None = None

    def _built(self) -> AESGCMRequestStateCodec:
        if self._codec is None:
            key = hashlib.sha256(_KEY_LABEL + self._secret().encode()).digest()
            self._codec = AESGCMRequestStateCodec([key])
        return self._codec

    def seal(self, payload: bytes) -> str:
        return self._built().seal(payload)

    def unseal(self, token: str) -> bytes:
        return self._built().unseal(token)


def state_security(get_state: Callable[[], GatewayState]) -> RequestStateSecurity:
    """How every MCP endpoint of the gateway seals and checks ``requestState``."""
    secret = lambda: get_state().settings.secret_key.get_secret_value()  # noqa: E731
    return RequestStateSecurity(codec=_SecretCodec(secret), ttl=STATE_TTL_S, bind_principal=_caller)


def _caller(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The tenant and key a state is bound to (None over stdio, where one key serves)."""
    if not isinstance(ctx.request, Request):
        return None
    principal = principal_of_request(ctx.request)
    return f"{principal.tenant_id}/{principal.key_id or '-'}"


def applies(protocol_version: str | None) -> bool:
    """True when the request's revision has no server-to-client requests (2026-07-28 on)."""
    return protocol_version in MODERN_PROTOCOL_VERSIONS


def ask(
    questions: dict[str, types.InputRequest],
    requests: list[ClientRequest],
    *,
    tenant_id: str,
    heard: int = 0,
) -> types.InputRequiredResult:
    """The result that hands ``questions`` to the client: each keyed by its ``requests``
    entry's ``key`` (the server's own key, or the relay request id); ``heard``, the run's
    last event already sent to the client."""
    pending = Pending(
        execution_id=requests[0].execution_id,
        tenant_id=tenant_id,
        requests=list(questions),
        ids={r.key: r.id for r in requests if r.key is not None and r.key != r.id},
        deadline=min(r.deadline for r in requests),
        heard=heard,
    )
    return types.InputRequiredResult(
        input_requests=questions, request_state=pending.model_dump_json()
    )


def invalid_state(message: str, **data: Any) -> MCPError:
    """A retry the gateway cannot take (JSON-RPC invalid params, our error body as data)."""
    return MCPError(
        code=types.INVALID_PARAMS,
        message=message,
        data={"type": "invalid_request_state", "message": message, **data},
    )


def pending_of(request_state: str | None, *, principal: Principal) -> Pending | None:
    """The questions a retry answers (None: a first call). The SDK already checked the seal;
    this refuses a state another tenant was given, or one whose tools stopped waiting."""
    if request_state is None:
        return None
    try:
        pending = Pending.model_validate_json(request_state)
    except ValidationError:
        raise invalid_state("requestState was not issued for a waiting execution") from None
    if pending.tenant_id != principal.tenant_id:
        raise invalid_state("requestState belongs to another tenant")
    if time.time() >= pending.deadline:
        raise invalid_state(
            "requestState expired: the tool stopped waiting for the answer "
            f"(execution {pending.execution_id})",
            execution_id=pending.execution_id,
        )
    return pending


async def deliver(
    state: GatewayState, pending: Pending, responses: types.InputResponses | None
) -> None:
    """Hand each answer to its waiting tool (once: a repeated retry delivers nothing twice).
    A retry missing an answer is refused before any is delivered; the tools keep waiting."""
    given = responses or {}
    missing = [key for key in pending.requests if key not in given]
    if missing:
        raise invalid_state(
            f"inputResponses lacks an answer for {', '.join(missing)}: "
            "retry with one for every key of inputRequests",
            missing=missing,
            execution_id=pending.execution_id,
        )
    for key in pending.requests:
        body = given[key].model_dump(by_alias=True, mode="json", exclude_none=True)
        reply = ClientReply(id=pending.ids.get(key, key), result=body)
        await upstream.answer_once(state.aredis, reply)
