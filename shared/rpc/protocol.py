"""Wire models of the RPC channel: one request on the shared list, one reply on a per-call key.

Deadlines are absolute Unix times (seconds, float) so that every hop measures the same
instant; bridges and toolhosts must therefore run on NTP-synced clocks (a skew of a few
ms only shifts when a call is declared late, it never makes one run twice).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared import tool_ids
from shared.errors import ErrorType

PROTOCOL_VERSION: Literal[1] = 1
CALL_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


class RpcError(BaseModel):
    """A structured failure: a stable ``type`` plus a message saying what happened."""

    model_config = ConfigDict(extra="forbid")

    type: ErrorType  # a tool call's failure: one of shared.errors.TOOL_CALL_ERRORS
    message: str
    # ``policy_denied``: the ids of the policies that decided (empty: none permits it);
    # the approval errors: those that asked for approval.
    policies: list[str] | None = None
    # ``approval_required``: the paused call's approval (``call_id``, ``expires_at`` Unix
    # time); the answer's ``by`` and ``reason`` on ``approval_denied``.
    approval: dict[str, Any] | None = None
    # ``authorization_required``: where the person connects the server (a connect link).
    url: str | None = None


class RpcRequest(BaseModel):
    """One tool call pushed by a bridge; ``allowed`` is the execution's scope (None = all)."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = PROTOCOL_VERSION
    call_id: str = Field(pattern=CALL_ID_PATTERN)
    execution_id: str = Field(min_length=1, max_length=64)
    tool: str = Field(description="`server:tool` (see shared.tool_ids)")
    args: dict[str, Any] = Field(default_factory=dict)
    deadline: float = Field(gt=0, description="absolute Unix time after which the call is void")
    allowed: list[str] | None = None
    # The call's id in the execution trace (``call-3``): progress and server-to-client
    # requests the toolhost relays name it, so they can be tied to the call.
    trace_call_id: str | None = Field(default=None, pattern=CALL_ID_PATTERN)
    # The caller's W3C trace context (``traceparent``, ``tracestate``; shared.telemetry): the
    # toolhost's span of this call is its child. Absent when the caller does not trace.
    otel: dict[str, str] | None = Field(default=None, max_length=4)
    # The approval this request redeems (its ``call_id``): sent again after a person answered
    # the ``approval_required`` reply; the toolhost runs it only if approved, and only once.
    approval: str | None = Field(default=None, pattern=CALL_ID_PATTERN)
    # A direct call made as an MCP task: what its end needs (``shared.direct.finish.CallEnd``);
    # the toolhost holds the call's lease while it runs, then records and announces its end.
    end: dict[str, Any] | None = None

    @field_validator("tool")
    @classmethod
    def _tool_id(cls, v: str) -> str:
        tool_ids.parse(v)  # ValueError naming the rule
        return v

    @property
    def server(self) -> str:
        """The server part of the tool id."""
        return tool_ids.parse(self.tool).server

    @property
    def tool_name(self) -> str:
        """The tool's own name on its server."""
        return tool_ids.parse(self.tool).name


ResourceOp = Literal[
    "read_resource",
    "list_resources",
    "list_resource_templates",
    # Prompts and completions, for the direct MCP surface (the gateway's own requests):
    "list_prompts",
    "get_prompt",  # params: {name, arguments}
    "complete",  # params: {ref, argument, context}
    "subscribe_resource",  # server and uri: the server then sends its updates
]
# The operations that name one server and carry ``params``.
PARAMS_OPS = frozenset({"get_prompt", "complete"})
# The ``execution_id`` of the gateway's own resources requests (MCP resources/list and
# /read for a client): no execution, so no grant; the gateway checks the caller's scope.
GATEWAY_CALLER = "gateway"


class OnBehalf(BaseModel):
    """Who a gateway's own resources request runs for (an execution's: its grant's), so a
    server that acts for the person calling (docs/upstream-identity.md) serves them their
    own view: the tenant, the person (None: an API key), their token sealed for them."""

    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(min_length=1)
    user: str | None = None
    subject_token: str | None = Field(default=None, repr=False)


class ResourceRequest(BaseModel):
    """A resources operation on one server (``server`` None: list every server's).

    ``allowed_servers`` is the execution's scope (the servers of its granted tools; None
    = all); the toolhost refuses a server outside it.
    """

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = PROTOCOL_VERSION
    op: ResourceOp
    call_id: str = Field(default_factory=lambda: uuid.uuid4().hex, pattern=CALL_ID_PATTERN)
    execution_id: str = Field(min_length=1, max_length=64)
    server: str | None = None
    uri: str | None = Field(default=None, min_length=1, max_length=8192)
    deadline: float = Field(gt=0)
    allowed_servers: list[str] | None = None
    # get_prompt and complete: the MCP request's params; read_resource: a 2026-07-28 retry's
    # inputResponses and requestState
    params: dict[str, Any] | None = None
    # A GATEWAY_CALLER request's caller (an execution's request: ignored, its grant says).
    caller: OnBehalf | None = None

    @field_validator("server")
    @classmethod
    def _server_name(cls, v: str | None) -> str | None:
        if v is not None and not tool_ids.is_server_name(v):
            raise ValueError(f"server {v[:80]!r}: {tool_ids.SERVER_NAME_RULE}")
        return v

    @model_validator(mode="after")
    def _check_read(self) -> ResourceRequest:
        if self.op in ("read_resource", "subscribe_resource") and (
            self.server is None or self.uri is None
        ):
            raise ValueError(f"{self.op} needs a server and a uri")
        if self.op in PARAMS_OPS and (self.server is None or self.params is None):
            raise ValueError(f"{self.op} needs a server and params")
        return self


class RpcReply(BaseModel):
    """The answer to one request: ``result`` when ``ok``, else ``error``."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = PROTOCOL_VERSION
    call_id: str
    ok: bool
    result: Any = None
    error: RpcError | None = None
    duration_ms: float = Field(ge=0)

    @model_validator(mode="after")
    def _check_outcome(self) -> RpcReply:
        if self.ok and self.error is not None:
            raise ValueError("a successful reply carries no error")
        if not self.ok and self.error is None:
            raise ValueError("a failed reply must carry an error")
        return self

    @classmethod
    def failure(
        cls,
        *,
        call_id: str,
        type: ErrorType,
        message: str,
        duration_ms: float = 0.0,
        policies: list[str] | None = None,
        approval: dict[str, Any] | None = None,
        url: str | None = None,
    ) -> RpcReply:
        """A failed reply."""
        return cls(
            call_id=call_id,
            ok=False,
            error=RpcError(
                type=type, message=message, policies=policies, approval=approval, url=url
            ),
            duration_ms=duration_ms,
        )


def encode(message: RpcRequest | ResourceRequest | RpcReply) -> bytes:
    """Serialize for Redis (orjson: the hot path serializes every call twice)."""
    return orjson.dumps(message.model_dump(mode="json"))


def decode_request(raw: bytes | str) -> RpcRequest:
    """Parse a request; raises ``ValueError`` (pydantic or JSON) when malformed."""
    return RpcRequest.model_validate(orjson.loads(raw))


def decode_message(raw: bytes | str) -> RpcRequest | ResourceRequest:
    """Parse a tool call or (it has an ``op``) a resources request; ``ValueError`` when malformed."""
    data = orjson.loads(raw)
    if isinstance(data, dict) and "op" in data:
        return ResourceRequest.model_validate(data)
    return RpcRequest.model_validate(data)


def decode_reply(raw: bytes | str) -> RpcReply:
    """Parse a reply; raises ``ValueError`` (pydantic or JSON) when malformed."""
    return RpcReply.model_validate(orjson.loads(raw))
