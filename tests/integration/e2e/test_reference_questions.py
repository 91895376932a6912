"""Our reference server's questions through ``/mcp/servers/conformance`` with SDK clients at
2026-07-28: the toolhost speaks 2026-07-28 to it, so each question is the server's own
``InputRequiredResult`` entry (its keys), answered through the gateway. A stack of its own:
the conformance runs of test_reference_conformance.py leave the server's tools waiting on
answers the suite never sends."""

from __future__ import annotations

import httpx
import pytest
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import FileUrl

from tests.integration.mcp_servers import conformance_server
from tests.stack import E2EStack, stack_fixture

reference = stack_fixture(lambda tmp: {"conformance": conformance_server()}, learning=False)
ELICIT = "test_input_required_result_elicitation"


async def _never_asked(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    raise AssertionError(f"a stateless client is never sent a request: {params}")


async def _no_llm(
    context: ClientRequestContext, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    raise AssertionError(f"not asked in this test: {params}")


async def _roots(context: ClientRequestContext) -> types.ListRootsResult:
    raise AssertionError("a stateless client is never sent roots/list")


def _url(stack: E2EStack) -> str:
    return f"{stack.gateway_url}/mcp/servers/conformance"


def _texts(result: types.CallToolResult) -> list[str | None]:
    return [getattr(block, "text", None) for block in result.content]


async def test_the_servers_own_keys_reach_the_client_and_two_waiting_calls_do_not_collide(
    reference: E2EStack,
) -> None:
    """Two clients' calls wait on the same question at once, and a third client's prompts/get
    is asked too: each gets the server's own key (``user_name``, ``user_context``), and each
    answer finishes its own call (2025-11-25 downstream, the second one was refused as
    unattributable and the prompt's question refused outright)."""
    async with (
        Client(_url(reference), elicitation_callback=_never_asked) as ada,
        Client(_url(reference), elicitation_callback=_never_asked) as grace,
    ):
        asked = {}
        for name, client in (("Ada", ada), ("Grace", grace)):
            first = await client.session.call_tool(ELICIT, {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult), first
            assert list(first.input_requests or {}) == ["user_name"], first
            asked[name] = (client, first)
        async with Client(_url(reference), elicitation_callback=_never_asked) as prompting:
            prompt = await prompting.session.get_prompt(
                "test_input_required_result_prompt", allow_input_required=True
            )
            assert isinstance(prompt, types.InputRequiredResult), prompt
            assert list(prompt.input_requests or {}) == ["user_context"], prompt
            context = types.ElicitResult(action="accept", content={"context": "tea"})
            got = await prompting.session.get_prompt(
                "test_input_required_result_prompt",
                input_responses={"user_context": context},
                request_state=prompt.request_state,
            )
        assert [m.content.text for m in got.messages] == ["Use this context: tea"]  # type: ignore[union-attr]
        for name, (client, first) in reversed(asked.items()):
            answer = types.ElicitResult(action="accept", content={"name": name})
            done = await client.session.call_tool(
                ELICIT, {}, input_responses={"user_name": answer}, request_state=first.request_state
            )
            assert isinstance(done, types.CallToolResult) and not done.is_error, done
            assert _texts(done) == [f"Hello, {name}!"]


async def test_the_server_asks_only_what_the_client_declared_and_roots_are_the_clients(
    reference: E2EStack,
) -> None:
    """The server is told the calling client's capabilities: one that declared sampling and
    roots is asked those two, never elicitation; its roots answer reaches the server."""
    async with Client(
        _url(reference), sampling_callback=_no_llm, list_roots_callback=_roots
    ) as client:
        tool = "test_input_required_result_capabilities"
        first = await client.session.call_tool(tool, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert sorted(first.input_requests or {}) == ["client_roots", "greeting"], first
        roots = await client.session.call_tool(
            "test_input_required_result_list_roots", {}, allow_input_required=True
        )
        assert isinstance(roots, types.InputRequiredResult), roots
        assert (roots.input_requests or {})["client_roots"].method == "roots/list"
        answer = types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work/project"))])
        done = await client.session.call_tool(
            "test_input_required_result_list_roots",
            {},
            input_responses={"client_roots": answer},
            request_state=roots.request_state,
        )
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert _texts(done) == ["The client has 1 roots: file:///work/project"]


async def test_a_resource_that_asks_first_passes_its_question_through(
    reference: E2EStack,
) -> None:
    """resources/read may end with the server's InputRequiredResult too; the retry's answer
    reaches the server, whose state comes back sealed inside ours."""
    async with Client(_url(reference), elicitation_callback=_never_asked) as client:
        uri = "test://asks-first"
        first = await client.session.read_resource(uri, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert list(first.input_requests or {}) == ["section"], first
        answer = types.ElicitResult(action="accept", content={"section": "intro"})
        read = await client.session.read_resource(
            uri, input_responses={"section": answer}, request_state=first.request_state
        )
    assert [getattr(c, "text", None) for c in read.contents] == ["intro"]


async def test_a_prompt_that_asks_is_refused_clearly_to_a_2025_11_25_session(
    reference: E2EStack,
) -> None:
    """A 2025-11-25 session cannot be handed an InputRequiredResult for a prompt."""
    async with Client(_url(reference), mode="legacy") as legacy:
        with pytest.raises(MCPError) as refused:
            await legacy.get_prompt("test_input_required_result_prompt")
    assert refused.value.error.code == types.INVALID_REQUEST
    assert "2026-07-28" in refused.value.error.message, refused.value.error


def test_v1_servers_says_the_reference_server_speaks_2026_07_28(reference: E2EStack) -> None:
    with httpx.Client(base_url=reference.gateway_url, timeout=30) as client:
        servers = {s["name"]: s for s in client.get("/v1/servers").json()["servers"]}
    assert servers["conformance"]["protocol_version"] == "2026-07-28", servers
