"""From Redis to the direct surface's listeners: the toolhost's tool list syncs and the
servers' own notices (resource and prompt list changes, resource updates)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import orjson
from redis.exceptions import RedisError

from services.gateway.mcp.direct.listeners import Listeners
from services.gateway.ops.subscription import subscription
from services.gateway.state import GatewayState
from shared.queues import SERVER_NOTICES_CHANNEL, TOOLS_LISTED_CHANNEL

log = logging.getLogger(__name__)

LISTEN_POLL_S = 2.0  # under the async Redis client's socket timeout


async def relay(get_state: Callable[[], GatewayState], listeners: Listeners) -> None:
    """``notifications/tools/list_changed`` to the clients of a server's endpoint and of
    the aggregate, each time the toolhost synced a changed tool list for it; and
    ``notifications/resources/updated`` to the clients subscribed to a resource."""
    failures = 0
    while True:
        try:
            async with subscription(get_state().aredis, TOOLS_LISTED_CHANNEL) as pubsub:
                await pubsub.subscribe(SERVER_NOTICES_CHANNEL)
                failures = 0
                while True:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=LISTEN_POLL_S
                    )
                    if message is None:
                        continue
                    if _text_of(message["channel"]) == SERVER_NOTICES_CHANNEL:
                        await _notice(listeners, orjson.loads(message["data"]))
                    else:
                        await listeners.list_changed(_text_of(message["data"]))
        except Exception as exc:  # Redis restarting (or worse): listen again after a
            # pause; never let it end the task group the app's lifespan holds
            failures += 1
            level = logging.WARNING if isinstance(exc, RedisError) else logging.ERROR
            log.log(level, "direct surface: tool list changes not heard: %r", exc)
            await anyio.sleep(min(5.0, 0.2 * 2**failures))


async def _notice(listeners: Listeners, notice: dict[str, Any]) -> None:
    """A server's notice: ``{server, list}`` for a list change, ``{server, uri}`` for an update."""
    if notice.get("list") in ("resources", "prompts"):
        await listeners.list_changed(str(notice.get("server")), str(notice["list"]))
    elif notice.get("uri") is not None:
        await listeners.updated(str(notice.get("server")), str(notice.get("uri")))


def _text_of(data: bytes | str) -> str:
    return data.decode() if isinstance(data, bytes) else str(data)
