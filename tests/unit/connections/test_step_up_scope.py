"""The scope a step up asks for (SEP-2350): the union of what is granted and what a 403
``insufficient_scope`` names, and nothing when it names nothing new."""

from __future__ import annotations

import httpx2

from shared.connections.oauth import step_up_scope, wider_scope


def _403(challenge: str) -> httpx2.Response:
    return httpx2.Response(403, headers={"WWW-Authenticate": challenge})


def test_a_step_up_asks_for_the_union_of_the_granted_and_the_new_scopes() -> None:
    answer = _403('Bearer error="insufficient_scope", scope="mcp:write", resource_metadata="x"')
    assert step_up_scope(answer, granted="mcp:basic offline_access") == (
        "mcp:basic offline_access mcp:write"
    )
    assert step_up_scope(answer, granted=None) == "mcp:write"


def test_nothing_new_or_no_step_up_asked_gives_none() -> None:
    asks_held = _403('Bearer error="insufficient_scope", scope="mcp:admin"')
    assert step_up_scope(asks_held, granted="mcp:admin") is None  # would loop: never again
    assert step_up_scope(_403('Bearer error="invalid_token"'), granted="a") is None
    assert step_up_scope(httpx2.Response(401), granted="a") is None
    assert wider_scope("a b", "") is None
    assert wider_scope("a", "b a") == "a b"
