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
