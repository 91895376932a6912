"""A server that acts for the person calling: a session per person, each with their own token.

For an HTTP server configured with ``"auth"`` every call of a person goes over a session of
theirs whose requests carry a token of theirs for that server (a ``Credential``: exchanged
for theirs at the gateway's issuer, exchange.py; or from their own OAuth connection,
oauth_connections.py), never anyone else's and never the person's own token for the gateway.
With token exchange the server's own connection (the inherited ``ServerConnection``) reads
its tool list with the gateway client's own token, so the tools are known before anyone
calls; no call goes over it. With OAuth nobody but a connected person can list them: the
server is ``needs_user_authorization`` and its tools are those a person's session lists.

The people's sessions are a pool: at most ``max_sessions`` (the least recently used idle one
is closed to make room), and a session idle for ``idle_s`` is closed. A call made with an API
key is refused ``authorization_required``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx2
from mcp import types

from services.toolhost.registry import (
    AuthorizationRequired,
    ServerUnavailable,
    ToolResult,
    UnknownTool,
)
from services.toolhost.servers import HttpServer
from services.toolhost.sessions import ServerConnection, StateCallback, ToolsCallback
from services.toolhost.upstream import CallContext, Caller, Upstream
from shared.connections.oauth import insufficient_scope
from shared.server_states import ServerState

log = logging.getLogger(__name__)
T = TypeVar("T")

REAP_EVERY_S = 15.0
LIST_EVERY_S = 5.0  # how often an OAuth server nobody listed yet looks for a connected person


class BearerFrom(httpx2.Auth):
    """Sets ``Authorization: Bearer`` on each request from ``token()`` (a person's held token);
    ``refused``: the server's latest answer was 401 (the token revoked or expired there);
    ``challenged``: the scope a 403 ``insufficient_scope`` named (until taken: a step up)."""

    def __init__(self, token: Callable[[], Awaitable[str]]) -> None:
        self._token = token
        self.refused = False
        self.challenged: str | None = None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {await self._token()}"
        response = yield request
        self.refused = response.status_code == 401
        challenged = insufficient_scope(response)
        if challenged is not None:
            self.challenged = challenged

    def sync_auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, Any, None]:
        raise RuntimeError("the toolhost's MCP sessions are asynchronous")


class Credential(Protocol):
    """Where a person's token for one server comes from."""

    # The client's own token for reading the tool list; None: only people may list them.
    listing: Callable[[], Awaitable[str]] | None

    async def token(self, caller: Caller, *, fresh: bool) -> str:
        """The person's token (``fresh``: checked at its source now, as each call does;
        otherwise what is held may do, as for a session's pings). AuthorizationRequired when
        the person must sign in or connect; ServerUnavailable when the source is down."""
        ...

    async def someone(self) -> Caller | None:
        """A person whose session may list the tools, when people alone can (else None)."""
        ...

    async def refused(self, caller: Caller) -> AuthorizationRequired:
        """What to raise when the server answered 401 to the person's token: the token is
        forgotten (and a connection deleted), and they are asked to sign in or connect again."""
        ...

    async def step_up(self, caller: Caller, challenged: str) -> AuthorizationRequired | None:
        """What to raise when the server answered 403 ``insufficient_scope`` naming
        ``challenged``: the person asked to grant more (their credential kept meanwhile);
        None when asking them cannot help."""
        ...


def person_of(server: str, caller: Caller | None) -> tuple[str, str]:
    """The tenant and user a call runs for; AuthorizationRequired for a key's call."""
    if caller is None or caller.user is None:
        raise AuthorizationRequired(
            f"MCP server {server!r} acts for the person calling: call it with a person's "
            "access token from the gateway's identity provider (an API key names no person)"
        )
    return caller.tenant_id, caller.user


@dataclass
class _Session:
    """One person's session: the connection, the task running it, the latest sealed token."""

    connection: ServerConnection
    task: asyncio.Task[None]
    caller: Caller
    auth: BearerFrom
    used_at: float = field(default_factory=time.monotonic)
    calls: int = 0  # in flight: a busy session is never closed


class PerUserServer(ServerConnection):
    """Lists a server's tools with the client's own token; calls them as the person calling."""

    def __init__(
        self,
        *,
        name: str,
        config: HttpServer,
        credential: Credential,
        on_tools: ToolsCallback,
        on_state: StateCallback,
        upstream: Upstream | None,
        connect_timeout_s: float,
        max_sessions: int,
        idle_s: float,
    ) -> None:
        listing = credential.listing
        super().__init__(
            name=name,
            config=config,
            on_tools=on_tools,
            on_state=on_state,
            connect_timeout_s=connect_timeout_s,
            upstream=upstream,
            http_auth=None if listing is None else BearerFrom(listing),
        )
        self._credential = credential
        self._people_list_tools = listing is None
        self._listed = False  # a person's session listed the tools (people_list_tools)
        self._max_sessions = max_sessions
        self._idle_s = idle_s
        self._sessions: OrderedDict[tuple[str, str], _Session] = OrderedDict()
        self._opening: dict[tuple[str, str], asyncio.Lock] = {}

    @property
    def awaiting(self) -> bool:
        """Whether its tools are unknown until a connected person's session lists them."""
        return self._people_list_tools and not self._listed

    async def _before_listing(self, caller: Caller) -> None:
        """Answer a call to a tool of this server while its tools are unknown: always raises.
        AuthorizationRequired (with a connect link) for a person who has not connected it;
        for one who has, UnknownTool: their session is opened now, listing the tools for the
        next run (nothing is called: the name was not checked against any tool)."""
        await self._credential.token(caller, fresh=True)
        await self._session_for(caller, None)
        raise UnknownTool(
            f"MCP server {self.name!r}: its tools were not known when this run started; "
            "your connection lists them now: call again"
        )

    @property
    def sessions(self) -> int:
        """People's sessions open now."""
        return len(self._sessions)

    async def run(self) -> None:
        """The listing connection and the reaper of idle sessions; cancel to stop (every
        person's session is closed)."""
        reaper = asyncio.create_task(self._reap_loop(), name=f"mcp:{self.name}:reaper")
        try:
            if not self._people_list_tools:
                await super().run()
                return
            await self._set_state(ServerState.NEEDS_USER_AUTHORIZATION, None)
            self.first_attempt_done.set()
            await self._list_as_someone()
            await asyncio.Event().wait()  # people's sessions only, until cancelled
        finally:
            reaper.cancel()
            for key in list(self._sessions):
                await self._close_session(key)

    async def call_tool(
        self, tool: str, args: dict[str, Any], *, context: CallContext | None = None
    ) -> ToolResult:
        caller = context.caller if context is not None else None
        key = person_of(self.name, caller)
        assert caller is not None
        if self.awaiting:
            await self._before_listing(caller)
        session = await self._checked_session(key, caller, context)
        session.calls += 1
        session.auth.challenged = None
        try:
            result = await session.connection.call_tool(tool, args, context=context)
        except ServerUnavailable:
            if not session.auth.refused:
                raise
        finally:
            session.calls -= 1
            session.used_at = time.monotonic()
        if session.auth.refused:  # 401 mid-session: revoked at the server's end
            await self._close_session(key)
            raise await self._credential.refused(caller)
        challenged, session.auth.challenged = session.auth.challenged, None
        if challenged is not None and not result.ok:  # 403 insufficient_scope: a step up
            asked = await self._credential.step_up(caller, challenged)
            if asked is not None:
                raise asked
            return ToolResult(ok=False, error=(
                f"MCP server {self.name!r} refused the call for lack of scope "
                f"{challenged or '(unnamed)'}, which asking you again cannot grant"))  # fmt: skip
        return result

    async def as_person(
        self, caller: Caller | None, use: Callable[[ServerConnection], Awaitable[T]]
    ) -> T:
        """``use`` (a resources, prompts or completion request) on the person's own session,
        checked as a call is: AuthorizationRequired for a key, or a person who has not
        connected (with a link) or whose token the server refused (the connection deleted);
        a step up asked for as for a call."""
        key = person_of(self.name, caller)
        assert caller is not None
        session = await self._checked_session(key, caller, None)
        session.calls += 1
        session.auth.challenged = None
        try:
            return await use(session.connection)
        except Exception:
            if session.auth.refused:  # 401: revoked at the server's end
                await self._close_session(key)
                raise await self._credential.refused(caller) from None
            challenged, session.auth.challenged = session.auth.challenged, None
            if challenged is not None:  # 403 insufficient_scope: a step up
                asked = await self._credential.step_up(caller, challenged)
                if asked is not None:
                    raise asked from None
            raise
        finally:
            session.calls -= 1
            session.used_at = time.monotonic()

    # The gateway's own session acts for nobody: a person's requests go through ``as_person``.
    async def read_resource(self, params: Any) -> Any:
        raise ServerUnavailable(self._not_shared("resources"))

    async def list_resources(self, *, templates: bool = False) -> list[Any]:
        raise ServerUnavailable(self._not_shared("resources"))

    async def list_prompts(self) -> list[types.Prompt]:
        raise ServerUnavailable(self._not_shared("prompts"))

    async def subscribe_resource(self, uri: str) -> None:
        raise ServerUnavailable(
            f"MCP server {self.name!r} acts for the person calling: subscribing to its "
            "resources is not offered (read them again instead)"
        )

    async def get_prompt(self, params: Any) -> Any:
        raise ServerUnavailable(self._not_shared("prompts"))

    async def complete(self, ref: Any, argument: Any, context: Any) -> types.CompleteResult:
        raise ServerUnavailable(self._not_shared("completions"))

    def _not_shared(self, what: str) -> str:
        return (
            f"MCP server {self.name!r} acts for the person calling: its {what} are not "
            "served to the gateway's own session"
        )

    async def _list_as_someone(self) -> None:
        """Until a person's session has listed the tools: every ``LIST_EVERY_S``, open the
        session of a person who connected the server (its tools go to the catalog)."""
        while not self._listed:
            try:
                caller = await self._credential.someone()
                if caller is not None:
                    await self._credential.token(caller, fresh=True)
                    await self._session_for(caller, None)
            except (AuthorizationRequired, ServerUnavailable) as exc:
                log.info("server %s: tools not listed yet: %s", self.name, exc)
            except Exception:
                log.exception("server %s: listing its tools as a person failed", self.name)
            if not self._listed:
                await asyncio.sleep(LIST_EVERY_S)

    async def _listed_tools(self, server: str, tools: list[types.Tool]) -> None:
        self._listed = True
        self.tools = {t.name: t for t in tools}  # the server's, as its scope is checked with
        await self._on_tools(server, tools)

    async def _checked_session(
        self, key: tuple[str, str], caller: Caller, context: CallContext | None
    ) -> _Session:
        """The person's session, their token checked at its source first (refused or
        unreachable: said before any connection; refused, their session goes too)."""
        try:
            await self._credential.token(caller, fresh=True)
        except AuthorizationRequired:
            await self._close_session(key)  # revoked or expired: their session goes too
            raise
        return await self._session_for(caller, context)

    async def _session_for(self, caller: Caller, context: CallContext | None) -> _Session:
        assert caller.user is not None
        key = (caller.tenant_id, caller.user)
        async with self._opening.setdefault(key, asyncio.Lock()):
            session = self._sessions.get(key)
            if session is not None and session.connection.state != ServerState.READY:
                await self._close_session(key)  # it died (or its token was refused): a fresh one
                session = None
            if session is None:
                session = await self._open_session(key, caller, context)
            session.caller = caller  # the newest token: what a refresh is exchanged from
            self._sessions.move_to_end(key)
            return session

    async def _open_session(
        self, key: tuple[str, str], caller: Caller, context: CallContext | None
    ) -> _Session:
        await self._make_room()
        holder: dict[str, _Session] = {}

        async def token() -> str:
            return await self._credential.token(holder["session"].caller, fresh=False)

        async def quiet_tools(server: str, tools: list[types.Tool]) -> None:
            pass  # the tools known are the listing connection's

        async def quiet_state(server: str, state: str, error: str | None) -> None:
            pass  # the server's state is the listing connection's

        auth = BearerFrom(token)
        connection = ServerConnection(
            name=self.name,
            config=self.config,
            on_tools=self._listed_tools if self._people_list_tools else quiet_tools,
            on_state=quiet_state,
            connect_timeout_s=self._connect_timeout_s,
            upstream=self._upstream,
            http_auth=auth,
        )
        task = asyncio.create_task(connection.run(), name=f"mcp:{self.name}:{key[1]}")
        session = holder["session"] = _Session(connection, task, caller, auth)
        self._sessions[key] = session
        deadline = context.deadline if context is not None and context.deadline else None
        wait_s = self._connect_timeout_s if deadline is None else deadline - time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(connection.first_attempt_done.wait(), max(0.0, wait_s))
        if connection.state != ServerState.READY:
            error = connection.last_error or "no answer yet"
            await self._close_session(key)
            if auth.refused:
                raise await self._credential.refused(caller)
            raise ServerUnavailable(
                f"MCP server {self.name!r}: could not open a session as {key[1]}: {error}"
            )
        log.info("server %s: a session as %s of %s opened", self.name, key[1], key[0])
        return session

    async def _make_room(self) -> None:
        """Close the least recently used idle session when the pool is full."""
        if len(self._sessions) < self._max_sessions:
            return
        idle = next((k for k, s in self._sessions.items() if s.calls == 0), None)
        if idle is None:
            raise ServerUnavailable(
                f"MCP server {self.name!r}: {self._max_sessions} people's sessions are busy "
                "(AGENTCARDS_UPSTREAM_SESSIONS_PER_SERVER); retry in a moment"
            )
        await self._close_session(idle)

    async def _close_session(self, key: tuple[str, str]) -> None:
        session = self._sessions.pop(key, None)
        if session is None:
            return
        session.task.cancel()
        await asyncio.gather(session.task, return_exceptions=True)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(min(REAP_EVERY_S, self._idle_s))
            await self.reap_idle(time.monotonic())

    async def reap_idle(self, now: float) -> None:
        """Close the sessions idle (no call in flight) for ``idle_s`` by ``now`` (monotonic)."""
        cutoff = now - self._idle_s
        for key, session in list(self._sessions.items()):
            if session.calls == 0 and session.used_at < cutoff:
                log.info("server %s: the idle session as %s closed", self.name, key[1])
                await self._close_session(key)
