"""A question our reference server asks during ``prompts/get`` while another client's direct
call waits on its own question (2026-07-28). A stack of its own: the conformance runs of
test_reference_conformance.py leave the server's tools waiting on answers the suite never
sends, and a question asked while another execution's call is in flight on the same stdio
session is refused as unattributable, which would end this test's first call."""

from __future__ import annotations

import pytest
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.integration.e2e.conftest import E2EStack, stack_fixture
from tests.integration.mcp_servers import conformance_server

reference = stack_fixture(lambda tmp: {"conformance": conformance_server()}, learning=False)


async def _never_asked(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    raise AssertionError(f"a stateless client is never sent a request: {params}")


async def test_a_question_during_prompts_get_never_reaches_another_calls_client(
    reference: E2EStack,
) -> None:
    """One client's direct call waits on its question (2026-07-28); meanwhile another client's
    prompts/get makes the server ask too. Over stdio nothing says whose question that is: it
    is refused at once, not relayed to the waiting call's client, whose retry still finishes."""
    url = f"{reference.gateway_url}/mcp/servers/conformance"
    tool = "test_input_required_result_elicitation"
    async with Client(url, elicitation_callback=_never_asked) as waiting:
        first = await waiting.session.call_tool(tool, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        (key, asked), *others = (first.input_requests or {}).items()
        assert not others and isinstance(asked, types.ElicitRequest)
        async with Client(url, elicitation_callback=_never_asked) as prompting:
            with pytest.raises(MCPError) as refused:
                await prompting.get_prompt("test_input_required_result_prompt")
        assert "prompts/get" in refused.value.error.message, refused.value.error
        answer = types.ElicitResult(action="accept", content={"name": "Ada"})
        done = await waiting.session.call_tool(
            tool, {}, input_responses={key: answer}, request_state=first.request_state
        )
    assert isinstance(done, types.CallToolResult) and not done.is_error, done
    assert [getattr(block, "text", None) for block in done.content] == ["Hello, Ada!"]
