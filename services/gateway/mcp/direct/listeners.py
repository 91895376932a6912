"""Who hears a direct endpoint's news, and telling them: list changes and resource updates.

A 2025-11-25 client connection hears of a list change on the endpoints it used and of the
resources it subscribed to; a 2026-07-28 ``subscriptions/listen`` stream hears through the
endpoint's bus (``mcp/listen.py``), which is told the same news here.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext

from services.gateway.mcp import listen as listening_streams
from services.gateway.mcp.log_messages import connection_of
from services.gateway.ops import downstream_resources as downstream

log = logging.getLogger(__name__)


class Listeners:
    """The client connections of one app's direct surface (and of ``/mcp`` in direct or both
    mode) that hear of list changes and resource updates; a connection that ends drops out
    by itself."""

    def __init__(self) -> None:
        # By endpoint (None: the aggregate, and /mcp in direct or both mode).
        self._listening: dict[str | None, weakref.WeakSet[Connection]] = {}
        # (server, the server's URI) -> each subscribed connection and the URIs it knows the
        # resource by (its own on the server's endpoint, agentcards://… on the aggregate).
        self._subscribed: dict[
            tuple[str, str], weakref.WeakKeyDictionary[Connection, set[str]]
        ] = {}

    def listen(self, endpoint: str | None, ctx: ServerRequestContext[Any]) -> None:
        """Remember the client connection of a request to ``endpoint`` (None: every server's
        tools): it is told when the tool list changes."""
        self._listening.setdefault(endpoint, weakref.WeakSet()).add(connection_of(ctx.session))

    def subscribe(
        self, ctx: ServerRequestContext[Any], resource: tuple[str, str], seen: str
    ) -> None:
        """The request's connection hears ``resource``'s updates, as ``seen`` (the URI it used)."""
        connections = self._subscribed.setdefault(resource, weakref.WeakKeyDictionary())
        connections.setdefault(connection_of(ctx.session), set()).add(seen)

    def unsubscribe(
        self, ctx: ServerRequestContext[Any], resource: tuple[str, str], seen: str
    ) -> None:
        """The request's connection no longer hears ``resource``'s updates as ``seen``."""
        connections = self._subscribed.get(resource, weakref.WeakKeyDictionary())
        uris = connections.get(connection_of(ctx.session))
        if uris is not None:
            uris.discard(seen)

    async def list_changed(self, server: str, what: str = "tools") -> None:
        """``notifications/<what>/list_changed`` to the clients of ``server``'s endpoint and of
        the aggregate."""
        for name in (server, None):
            for connection in list(self._listening.get(name, ())):
                try:
                    if what == "resources":
                        await connection.send_resource_list_changed()
                    elif what == "prompts":
                        await connection.send_prompt_list_changed()
                    else:
                        await connection.send_tool_list_changed()
                except Exception as exc:  # a client gone meanwhile
                    log.debug("%s/list_changed not sent to a %s client: %s", what, name, exc)
            await listening_streams.publish(name, listening_streams.LIST_CHANGED[what])

    async def updated(self, server: str, uri: str) -> None:
        """Tell each connection subscribed to the resource, by the URI it subscribed with, and
        the listen streams of its server's endpoint and of the aggregate that asked for it."""
        await listening_streams.publish_updated(server, uri)
        await listening_streams.publish_updated(None, downstream.gateway_uri(server, uri))
        subscribers = self._subscribed.get((server, uri))
        for connection, uris in list((subscribers or {}).items()):
            for seen in list(uris):
                try:
                    await connection.send_resource_updated(seen)
                except Exception as exc:  # a client gone meanwhile
                    log.debug("resources/updated not sent for %s: %s", seen, exc)
