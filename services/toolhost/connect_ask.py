"""A person asked to connect a server through their MCP client, mid-call (URL elicitation).

When a call fails ``authorization_required`` with a connect link and the calling client
declared URL-mode elicitation (MCP 2025-11-25: ``elicitation: {url: {}}``; the gateway
advertises it as ``elicitation.url`` for the call, shared/rpc/upstream.py), the client is
asked ``elicitation/create`` with ``mode: "url"`` and the link, through the same relay as a
downstream server's questions (so it reaches a 2025-11-25 client as a request and a
2026-07-28 client as an ``InputRequiredResult``). If the person accepts and the connection is
stored before the call's deadline (the gateway's callback says so, shared/connections/links.py),
the call is made again, once; otherwise it fails ``authorization_required`` as before.
"""

from __future__ import annotations

import logging
import time

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from services.toolhost.registry import AuthorizationRequired
from shared.connections import links
from shared.rpc import upstream
from shared.rpc.protocol import RpcRequest
from shared.rpc.upstream import URL_ELICITATION

log = logging.getLogger(__name__)

# Kept for the call itself once the person has connected (and for its reply to go out).
CALL_MARGIN_S = 3.0


class ConnectAsker:
    """Asks the person behind a call to connect a server, when their client can be asked."""

    def __init__(self, redis_url: str) -> None:
        # Its waits block up to a call's deadline: a connection of its own, no socket timeout.
        self._redis = aioredis.Redis.from_url(redis_url, socket_timeout=None)

    async def connected(self, request: RpcRequest, refusal: AuthorizationRequired) -> bool:
        """Whether the person was asked through their client, accepted, and connected in
        time for the call to be made again."""
        if refusal.url is None:
            return False
        until = request.deadline - CALL_MARGIN_S
        try:
            offered = await upstream.advertised(self._redis, execution_id=request.execution_id)
            if not offered or URL_ELICITATION not in offered or until <= time.time():
                return False
            server = request.tool.partition(":")[0]
            question = upstream.ClientRequest(
                id=upstream.new_request_id(),
                execution_id=request.execution_id,
                method="elicitation/create",
                params={
                    "mode": "url",
                    "message": str(refusal),
                    "url": refusal.url,
                    "elicitationId": upstream.new_request_id(),
                },
                server=server,
                tool=request.tool,
                trace_call_id=request.trace_call_id,
                deadline=until,
            )
            reply = await upstream.ask(self._redis, question)
            result = reply.result if reply is not None and reply.error is None else None
            if not result or result.get("action") != "accept":
                return False  # declined, cancelled or unanswered: the error, with its link
            link = links.link_of(refusal.url)
            connected = await links.wait_connected(self._redis, link=link, until=until)
        except RedisError as exc:
            log.warning("could not ask the caller to connect %s: %s", request.tool, exc)
            return False
        log.info("call %s: the person was asked to connect %s: %s", request.call_id,
                 server, "connected" if connected else "not connected in time")  # fmt: skip
        return connected

    async def aclose(self) -> None:
        await self._redis.aclose()
