"""A person's token refused by the server mid-session (401) is noticed by the session's auth."""

from __future__ import annotations

import asyncio

import httpx2

from services.toolhost.peruser import BearerFrom


def test_a_401_marks_the_token_refused_until_the_server_takes_one_again() -> None:
    revoked = {"alice-2"}
    tokens = iter(["alice-1", "alice-2", "alice-3"])

    async def token() -> str:
        return next(tokens)

    def server(request: httpx2.Request) -> httpx2.Response:
        given = request.headers["Authorization"].removeprefix("Bearer ")
        return httpx2.Response(401 if given in revoked else 200)

    async def calls() -> list[bool]:
        auth = BearerFrom(token)
        seen = []
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(server), auth=auth) as c:
            for _ in range(3):
                await c.post("http://upstream.test/mcp")
                seen.append(auth.refused)
        return seen

    assert asyncio.run(calls()) == [False, True, False]


def test_a_403_insufficient_scope_is_kept_as_the_scope_it_asks_for() -> None:
    def server(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/write":
            challenge = 'Bearer error="insufficient_scope", scope="tickets:write"'
            return httpx2.Response(403, headers={"WWW-Authenticate": challenge})
        if request.url.path == "/forbidden":
            return httpx2.Response(403)  # a refusal, not a request for more scope
        return httpx2.Response(200)

    async def token() -> str:
        return "alice-1"

    async def calls() -> list[str | None]:
        auth = BearerFrom(token)
        seen = []
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(server), auth=auth) as c:
            for path in ("/read", "/forbidden", "/write", "/read"):
                await c.post(f"http://upstream.test{path}")
                seen.append(auth.challenged)
        return seen

    assert asyncio.run(calls()) == [None, None, "tickets:write", "tickets:write"]
