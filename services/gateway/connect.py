"""People connect servers that act for them: the connect link and the OAuth callback.

``GET /oauth/connect/<link>`` (the link in an ``authorization_required`` error; once, for
ten minutes) is for the person it names only, proven by their gateway sign-in (the
dashboard's session, services/gateway/signin.py), never by holding the link: the link sits
in error messages that traces and tool failures keep. A browser not signed in goes through
sign-in and comes back to the link; one signed in as someone else gets a 403 and the link
stays unused. A gateway without browser sign-in cannot tell who opened it, so it refuses
every link (fail closed). Then it discovers the server's authorization server, takes a
client there (the gateway's client ID metadata document, ``GET /oauth/client-metadata.json``,
when the authorization server takes those and the public URL is https; else a dynamic
registration), and sends the browser to authorize with PKCE. ``GET /oauth/callback``
takes the answer: the ``state`` names the connection under way (once) together with the
browser's own secret (a cookie set when the link was opened), the person signed in must
still be the link's, the code is exchanged with its PKCE verifier, and the tokens are stored
sealed for that person and server (shared/connections/). Anything wrong stores nothing and
says why.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode, urlsplit

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from services.gateway.signin import LOGIN, page
from shared.config import Settings
from shared.connections import links, metadata_document
from shared.connections.oauth import (
    Client,
    ConnectFailed,
    TokenRefused,
    begin,
    issuer_refusal,
    redeem,
)
from shared.connections.store import Connection, save
from shared.errors import AgentCardsError
from shared.privacy.keys import PiiKeys

log = logging.getLogger(__name__)
CONNECT_PREFIX, CALLBACK = links.CONNECT_PATH, metadata_document.CALLBACK_PATH
CLIENT_METADATA = metadata_document.DOCUMENT_PATH
# How long an authorization server may keep the metadata document before fetching it again.
DOCUMENT_MAX_AGE_S = 3600
NEW_LINK = "call the tool again for a new link"
LINK_PAGES = {  # a link that cannot be used: its page (status, title, text)
    "used": (410, "This link was used already",
             f"A link works once. If you connected, call the tool again; if not, {NEW_LINK}."),
    "expired": (410, "This link has expired",
                f"A link works for ten minutes after the call that made it: {NEW_LINK}."),
    "unknown": (404, "This link is not known",
                f"It was not made here, or it is more than an hour old: {NEW_LINK}."),
}  # fmt: skip


class Connector:
    """The two pages of a person's connection to a server."""

    def __init__(self, settings: Settings) -> None:
        assert settings.public_url
        self.settings = settings
        self.redirect_uri = metadata_document.callback_url(settings.public_url)
        # The client_id offered to authorization servers that take metadata documents: only
        # an https URL can be one (they fetch it), so an http gateway registers instead.
        self.metadata_url = metadata_document.usable_url(settings.public_url)
        if self.metadata_url is None:
            log.info(
                "AGENTCARDS_PUBLIC_URL %s is not https: connections use dynamic client "
                "registration, never the client ID metadata document",
                settings.public_url,
            )
        self.keys = PiiKeys.from_settings(settings)
        # The browser's secret binding a flow to the browser that opened the link (`__Host-`:
        # this host, path /, https only, as the session cookie's).
        self.secure = urlsplit(settings.public_url).scheme == "https"
        self.cookie = ("__Host-" if self.secure else "") + "agentcards_connect"

    def routes(self) -> list[BaseRoute]:
        return [
            Route(
                CONNECT_PREFIX + "{link}", self.connect, methods=["GET"], include_in_schema=False
            ),
            Route(CALLBACK, self.callback, methods=["GET"], include_in_schema=False),
            Route(
                CLIENT_METADATA,
                self.client_metadata,
                methods=["GET"],
                include_in_schema=False,
            ),
        ]

    async def client_metadata(self, request: Request) -> Response:
        """The gateway's client ID metadata document, for authorization servers to fetch."""
        assert self.settings.public_url
        return JSONResponse(
            metadata_document.document(self.settings.public_url),
            headers={"Cache-Control": f"public, max-age={DOCUMENT_MAX_AGE_S}"},
        )

    async def connect(self, request: Request) -> Response:
        """Use a connect link, as its own person: send the browser to the server's
        authorization server."""
        aredis = request.app.state.gateway.aredis
        link = request.path_params["link"]
        found = await links.peek_link(aredis, link)
        if found.status != "open" or found.record is None:
            return page(*LINK_PAGES[found.status])
        record = found.record
        if getattr(request.app.state, "signin", None) is None:
            return page(403, "Connecting needs a sign-in",
                        "This gateway has no browser sign-in (AGENTCARDS_OAUTH_CLIENT_ID), so it "
                        "cannot check that you are the person this link is for. The link was "
                        "not used; ask the gateway's operator to set up sign-in.")  # fmt: skip
        person = await self._signed_in(request)
        if person is None:  # sign in first, then back here
            target = urlencode({"next": request.url.path})
            return RedirectResponse(f"{LOGIN}?{target}", status_code=303)
        if person != (record["tenant_id"], record["user_id"]):
            return page(403, "This link is someone else's",
                        f"It connects {record['server']} for another person; you are signed "
                        f"in as {person[1]}. The link was not used and nothing was changed: "
                        "only its own person, signed in, can use it.")  # fmt: skip
        taken = await links.take_link(aredis, link)
        if taken.status != "open" or taken.record is None:  # used in the meantime
            return page(*LINK_PAGES[taken.status])
        server = record["server"]
        try:
            started = await begin(record["url"], scopes=record.get("scopes") or [],
                                  redirect_uri=self.redirect_uri,
                                  metadata_url=self.metadata_url)  # fmt: skip
        except ConnectFailed as exc:
            return page(502, f"Cannot connect {server} now", f"{exc}. Nothing was stored; "
                        f"try again later ({NEW_LINK}).")  # fmt: skip
        found_server, client = started.found, started.client
        flow = {
            "tenant_id": record["tenant_id"],
            "user_id": record["user_id"],
            "server": server,
            "resource": found_server.resource,
            "issuer": str(found_server.metadata.issuer),
            "iss_required": bool(
                found_server.metadata.authorization_response_iss_parameter_supported
            ),
            "token_endpoint": str(found_server.metadata.token_endpoint),
            "client_id": client.client_id,
            "client_secret": client.client_secret,
            "auth_method": client.auth_method,
            "verifier": started.verifier,
            "scope": started.scope,
            "link": links.digest_of(link),  # a call asked through its client waits on it
        }
        # One secret per browser, kept across its flows (two links opened at once both work).
        browser = request.cookies.get(self.cookie) or links.new_secret()
        await links.start_flow(aredis, self.keys, state=started.state, browser=browser, flow=flow)
        response = RedirectResponse(started.url, status_code=303)
        response.set_cookie(self.cookie, browser, max_age=links.FLOW_TTL_S, path="/",
                            secure=self.secure, httponly=True, samesite="lax")  # fmt: skip
        return response

    async def callback(self, request: Request) -> Response:
        """The authorization server's answer: exchange the code, store the tokens sealed."""
        params = request.query_params
        state = params.get("state")
        if not state:
            return _refused("the answer carries no state")
        browser = request.cookies.get(self.cookie)
        if not browser:
            return _refused("this browser opened no connect link (the answer must come back "
                            "to the browser that opened it)")  # fmt: skip
        aredis = request.app.state.gateway.aredis
        flow = await links.take_flow(aredis, self.keys, state=state, browser=browser)
        if flow is None:
            return _refused("its state names no connection under way in this browser (unknown, "
                            "used already, started in another browser, or older than ten "
                            "minutes)")  # fmt: skip
        person = await self._signed_in(request)
        if person != (flow["tenant_id"], flow["user_id"]):
            return page(403, "Not connected",
                        f"This connection is for the person who opened the link; this browser "
                        f"is {'signed in as ' + person[1] if person else 'not signed in'} now. "
                        f"Nothing was stored; sign in as them and {NEW_LINK}.")  # fmt: skip
        if "error" in params:
            return _refused(f"the authorization server answered {params['error']}: "
                            f"{params.get('error_description') or 'no description'}")  # fmt: skip
        wrong = issuer_refusal(params.get("iss"), issuer=flow["issuer"],
                               required=flow["iss_required"])  # fmt: skip
        if wrong is not None:
            return _refused(wrong)
        code = params.get("code")
        if not code:
            return _refused("the answer carries no code")
        client = Client(flow["client_id"], flow["client_secret"], flow["auth_method"])
        try:
            tokens = await redeem(token_endpoint=flow["token_endpoint"], client=client,
                                  redirect_uri=self.redirect_uri, code=code,
                                  verifier=flow["verifier"], resource=flow["resource"])  # fmt: skip
        except TokenRefused as exc:
            return _refused(f"the authorization server refused the code ({exc})")
        except ConnectFailed as exc:
            return page(502, "Cannot connect now", f"{exc}. Nothing was stored; {NEW_LINK}.")
        connection = Connection(
            tenant_id=flow["tenant_id"],
            user_id=flow["user_id"],
            server=flow["server"],
            access_token=tokens["access_token"],
            refresh_token=tokens.get("refresh_token"),
            expires_at=tokens["expires_at"],
            scope=tokens.get("scope") or flow["scope"],
            token_endpoint=flow["token_endpoint"],
            client_id=client.client_id,
            client_secret=client.client_secret,
            resource=flow["resource"],
            auth_method=client.auth_method,
        )
        pool = request.app.state.gateway.pool

        def store() -> None:
            with pool.connection() as conn:
                save(conn, self.keys, connection)

        await to_thread.run_sync(store)
        if flow.get("link"):
            await links.announce_connected(aredis, link_digest=flow["link"])
        return page(200, f"Connected to {flow['server']}",
                    f"{flow['server']} now acts for you ({flow['user_id']}). You can close this "
                    "page and run your call again.")  # fmt: skip

    async def _signed_in(self, request: Request) -> tuple[str, str] | None:
        """The tenant and user of the browser's dashboard session, if it has one."""
        sign_in: Any = getattr(request.app.state, "signin", None)
        if sign_in is None:
            return None
        try:
            person = await sign_in.principal(request.scope, request.app.state.gateway.aredis)
        except AgentCardsError:
            return None
        if person is None or person.user is None:
            return None
        return person.tenant_id, person.user


def _refused(why: str) -> Response:
    return page(400, "Not connected", f"Refused: {why}. Nothing was stored; {NEW_LINK}.")
