"""A narrowed API key on the real stack, over REST and MCP alike: a capability calling tools
outside its allow-list is refused before it starts (and its stats stay), searches offer
what the key may run first (the rest only when asked, marked), and a capability search
with nothing above the threshold shows the closest candidates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from shared.auth.store import issue_key
from shared.db import connect
from tests.integration.mcp_servers import example_server, time_server
from tests.stack import E2EStack, stack_fixture

e2e = stack_fixture(lambda tmp: {"example": example_server(tmp), "time": time_server()})

ADD_INTENT = "add two to a number, for the key scope test"


def _answer(result: types.CallToolResult) -> dict[str, Any]:
    # A failed call carries REST's envelope {"error": {...}} as its structured content.
    assert result.structured_content is not None, result.content
    return result.structured_content


class Surfaces:
    """One key, both surfaces: ``call(op, args)`` gives (REST answer, MCP answer)."""

    def __init__(self, stack: E2EStack, headers: dict[str, str]) -> None:
        self.stack, self.headers = stack, headers

    def rest(self, op: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        args = dict(args)
        if op == "execute_capability":
            ref = args.pop("capability_id")
            path, params = f"/v1/capabilities/{ref}/execute", {"wait": "true"}
        else:
            path, params = {"search_tools": "/v1/tools/search",
                            "search_capabilities": "/v1/capabilities/search"}[op], {}  # fmt: skip
        with httpx.Client(base_url=self.stack.gateway_url, headers=self.headers, timeout=60) as c:
            response = c.post(path, params=params, json=args)
        return response.status_code, response.json()

    async def mcp(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        async with (
            create_mcp_http_client(headers=self.headers) as http,
            streamable_http_client(f"{self.stack.gateway_url}/mcp", http_client=http) as (r, w),
            ClientSession(r, w) as session,
        ):
            await session.initialize()
            return _answer(await session.call_tool(op, args))


@pytest.fixture(scope="module")
def keys(e2e: E2EStack) -> Iterator[tuple[Surfaces, Surfaces, str]]:
    """(unrestricted, time-only) surfaces and the id of a learned capability calling example:add."""
    headers = []
    with connect(e2e.settings.database_url or "") as conn:
        for patterns in (None, ["time:*"]):
            _, key = issue_key(conn, tenant_id="default", tool_patterns=patterns)
            headers.append({"Authorization": f"Bearer {key}"})
        conn.commit()
    full, time_only = Surfaces(e2e, headers[0]), Surfaces(e2e, headers[1])
    with httpx.Client(base_url=e2e.gateway_url, headers=headers[0], timeout=60) as c:
        run = c.post(
            "/v1/executions",
            params={"wait": "true"},
            json={"code": "return await mcp.example.add(a=args['a'], b=2)",
                  "intent": ADD_INTENT, "args": {"a": 1}},
        ).json()  # fmt: skip
    assert run["status"] == "succeeded" and run["capability"], run
    yield full, time_only, run["capability"]["id"]


def _stats(e2e: E2EStack, capability_id: str) -> tuple[Any, ...]:
    with e2e.db() as conn:
        row = conn.execute(
            "SELECT usage_count, success_rate, "
            "(SELECT count(*) FROM executions WHERE capability_id = c.id) AS runs "
            "FROM capabilities c WHERE id = %s",
            (capability_id,),
        ).fetchone()
    assert row is not None
    return tuple(row.values())


async def test_a_capability_outside_the_allow_list_is_refused_before_it_starts(
    e2e: E2EStack, keys: tuple[Surfaces, Surfaces, str]
) -> None:
    _, time_only, capability_id = keys
    before = _stats(e2e, capability_id)
    args = {"capability_id": capability_id, "args": {"a": 1}}
    status, rest = time_only.rest("execute_capability", args)
    mcp = await time_only.mcp("execute_capability", args)
    assert status == 403, rest
    for answer in (rest, mcp):
        error = answer["error"]
        assert error["type"] == "tool_not_allowed", answer
        assert "example:add" in error["message"] and "time:*" in error["message"]
        assert error["details"]["tools"] == ["example:add"]
        assert error["details"]["capability_id"] == capability_id
    assert mcp["error"]["message"] == rest["error"]["message"]
    # Nothing started: no run, no lost call, the success rate as it was.
    assert _stats(e2e, capability_id) == before


async def test_searches_offer_what_the_key_may_run_and_the_rest_only_when_asked(
    keys: tuple[Surfaces, Surfaces, str],
) -> None:
    full, time_only, capability_id = keys
    query = {"query": "add two numbers", "limit": 10}
    _, rest = time_only.rest("search_tools", query)
    mcp = await time_only.mcp("search_tools", query)
    for answer in (rest, mcp):
        assert answer["hits"] and all(h["id"].startswith("time:") for h in answer["hits"]), answer
        assert all(h["runnable"] for h in answer["hits"])
    asked = {**query, "include_out_of_scope": True}
    _, rest = time_only.rest("search_tools", asked)
    mcp = await time_only.mcp("search_tools", asked)
    assert [h["id"] for h in rest["hits"]] == [h["id"] for h in mcp["hits"]]
    runnable = [h["runnable"] for h in rest["hits"]]
    assert runnable == sorted(runnable, reverse=True)  # what the key may run comes first
    add = next(h for h in rest["hits"] if h["id"] == "example:add")
    assert add["runnable"] is False and "allow-list" in add["not_runnable_reason"]
    # An unrestricted key sees example:add as runnable, as before.
    _, unrestricted = full.rest("search_tools", query)
    assert any(h["id"] == "example:add" and h["runnable"] for h in unrestricted["hits"])

    intent = {"intent": ADD_INTENT}
    _, rest = time_only.rest("search_capabilities", intent)
    mcp = await time_only.mcp("search_capabilities", intent)
    for answer in (rest, mcp):
        ids = [c["id"] for c in answer["capabilities"] + answer["candidates"]]
        assert capability_id not in ids, answer
    asked_caps = {**intent, "include_out_of_scope": True}
    _, rest = time_only.rest("search_capabilities", asked_caps)
    mcp = await time_only.mcp("search_capabilities", asked_caps)
    for answer in (rest, mcp):
        (match,) = [c for c in answer["capabilities"] if c["id"] == capability_id]
        assert match["runnable"] is False and match["out_of_scope_tools"] == ["example:add"]
        assert "example:add" in match["not_runnable_reason"]
    _, unrestricted = full.rest("search_capabilities", intent)
    (match,) = [c for c in unrestricted["capabilities"] if c["id"] == capability_id]
    assert match["runnable"] is True and match["not_runnable_reason"] is None


async def test_nothing_above_the_threshold_shows_the_closest_candidates(
    keys: tuple[Surfaces, Surfaces, str],
) -> None:
    full, _, capability_id = keys
    far = {"intent": "translate a poem from Finnish into Japanese haiku form"}
    _, rest = full.rest("search_capabilities", far)
    mcp = await full.mcp("search_capabilities", far)
    for answer in (rest, mcp):
        assert answer["capabilities"] == [] and answer["total_found"] == 0, answer
        (candidate,) = [c for c in answer["candidates"] if c["id"] == capability_id]
        assert candidate["below_threshold"] is True
        assert candidate["score"] < answer["threshold_used"]
    assert [c["score"] for c in rest["candidates"]] == [c["score"] for c in mcp["candidates"]]
    # A match above the threshold comes back as before, without candidates.
    _, near = full.rest("search_capabilities", {"intent": ADD_INTENT})
    assert near["capabilities"][0]["id"] == capability_id and near["candidates"] == []
    assert near["capabilities"][0]["below_threshold"] is False
