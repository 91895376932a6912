"""A person reading a resource or getting a prompt of a server they have not connected is
asked to connect it through their MCP client (URL elicitation), as a tool call is
(services/toolhost/connect_ask.py): on ``/mcp`` and on the direct endpoints.

A read or get refused ``authorization_required`` with a connect link, from a client that
declared ``elicitation.url``, asks ``elicitation/create`` (mode ``url``, the link): a
2025-11-25 session as a request made while the read waits, a 2026-07-28 client as an
``InputRequiredResult`` whose ``requestState`` (sealed by the endpoint's boundary, bound to the
caller and endpoint) names the link, so its retry comes back here. Once the person accepts
and the gateway's callback says the connection is stored (shared/connections/links.py)
before the request's deadline, the request is made again, once; otherwise it fails
``authorization_required`` with the link, as before. Listings just leave the server out.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from mcp import types
from mcp.server.context import ServerRequestContext
from redis.exceptions import RedisError

from services.gateway.mcp import input_required
from services.gateway.state import GatewayState
from shared.connections import links
from shared.errors import AuthorizationRequired

log = logging.getLogger(__name__)
T = TypeVar("T")

STATE_KEY = "agentcards_connect"  # our requestState: {STATE_KEY: link URL}, never a server's
INPUT_KEY = "connect"  # the one question's key in inputRequests / inputResponses
# Kept for the request itself once the person has connected (and for its answer to go out).
CALL_MARGIN_S = 3.0


def asked(params: types.RequestParams) -> str | None:
    """The connect link a 2026-07-28 retry answers (None: not a retry of ours)."""
    state = getattr(params, "request_state", None)
    if not state:
        return None
    try:
        held = orjson.loads(state)
    except orjson.JSONDecodeError:
        return None
    link = held.get(STATE_KEY) if isinstance(held, dict) else None
    return link if isinstance(link, str) else None


async def answered(
    state: GatewayState,
    ctx: ServerRequestContext[Any],
    params: types.RequestParams,
    fetch: Callable[[], Awaitable[T]],
) -> T | types.InputRequiredResult:
    """``fetch``'s answer; a person who must connect the server first, asked to through
    their client where it can be asked (see the module), or ``fetch``'s refusal."""
    until = time.time() + state.settings.tool_call_timeout_s - CALL_MARGIN_S
    link = asked(params)
    if link is not None:  # a 2026-07-28 retry: the person was asked, and answered
        responses = getattr(params, "input_responses", None) or {}
        answer = responses.get(INPUT_KEY)
        if isinstance(answer, types.ElicitResult) and answer.action == "accept":
            await _connected(state, link, until)
        return await fetch()  # connected: answered; otherwise refused again, with the link
    try:
        return await fetch()
    except AuthorizationRequired as refusal:
        url = (refusal.details or {}).get("url")
        if not url or not _declared(ctx) or until <= time.time():
            raise
        elicitation_id = uuid.uuid4().hex
        question = types.ElicitRequestURLParams(
            mode="url", message=refusal.message, url=str(url), elicitation_id=elicitation_id
        )
        if input_required.applies(ctx.protocol_version):
            return types.InputRequiredResult(
                input_requests={INPUT_KEY: types.ElicitRequest(params=question)},
                request_state=orjson.dumps({STATE_KEY: url}).decode(),
            )
        reply = await ctx.session.elicit_url(
            question.message, question.url, elicitation_id,
            related_request_id=ctx.request_id,
        )  # fmt: skip
        if reply.action != "accept" or not await _connected(state, str(url), until):
            raise
    return await fetch()


def _declared(ctx: ServerRequestContext[Any]) -> bool:
    declared = ctx.session.client_capabilities
    return bool(declared is not None and declared.elicitation and declared.elicitation.url)


async def _connected(state: GatewayState, url: str, until: float) -> bool:
    """Whether the connection the link starts was stored before ``until``."""
    try:
        connected = await links.wait_connected(state.aredis, link=links.link_of(url), until=until)
    except RedisError as exc:
        log.warning("could not wait for a connection through a connect link: %s", exc)
        return False
    log.info("a person asked to connect while reading: %s",
             "connected" if connected else "not connected in time")  # fmt: skip
    return connected
