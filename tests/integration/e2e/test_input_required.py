"""Multi-round trips (MCP 2026-07-28) through the gateway, with the SDK client and a real SDK
server whose tool elicits: the question reaches a stateless client as an InputRequiredResult,
its retry carries the answer to the tool waiting in the sandbox, and the run succeeds; a
2025-11-25 client still gets the question as a request over its session (the relay)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.integration.mcp_servers import elicit_test_server
from tests.stack import E2EStack, mcp_session, stack_fixture, wait_until

stack = stack_fixture(lambda tmp: {"asker": elicit_test_server()}, learning=False)

ASK = 'return await mcp.asker.ask_name(question=args["q"])'


@pytest.fixture(scope="module")
def ready(stack: E2EStack) -> E2EStack:
    def synced() -> bool:
        with stack.client() as client:
            tools = client.get("/v1/tools").json()["tools"]
        return "asker:ask_name" in {t["id"] for t in tools if t["available"]}

    wait_until(synced, what="the eliciting server's tools synced")
    return stack


def _answering(name: str, asked: list[types.ElicitRequestParams]) -> Any:
    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"name": name})

    return elicitation


def _payload(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content:
        return dict(result.structured_content)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


async def _first_round(client: Client, question: str) -> types.InputRequiredResult:
    first = await client.session.call_tool(
        "execute_code", {"code": ASK, "args": {"q": question}}, allow_input_required=True
    )
    assert isinstance(first, types.InputRequiredResult), first
    return first


async def test_execute_code_gets_an_input_required_result_and_the_answer_reaches_the_tool(
    ready: E2EStack,
) -> None:
    heard: list[str | None] = []  # the run's progress, over both rounds

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message)

    code = f'progress("about to ask", done=1, total=2)\n{ASK}'
    async with Client(f"{ready.gateway_url}/mcp", elicitation_callback=_answering("x", [])) as c:
        assert c.protocol_version == "2026-07-28"
        first = await c.session.call_tool(
            "execute_code",
            {"code": code, "args": {"q": "Who wrote the first program?"}},
            allow_input_required=True,
            progress_callback=on_progress,
        )
        assert isinstance(first, types.InputRequiredResult), first
        (key, asked), *others = (first.input_requests or {}).items()
        assert not others and isinstance(asked, types.ElicitRequest)
        assert asked.params.message == "Who wrote the first program?"
        origin = (first.meta or {})["agentcards/origin"][key]  # which server, tool and run asks
        assert origin["server"] == "asker" and origin["tool"] == "asker:ask_name"
        answer = types.ElicitResult(action="accept", content={"name": "Ada Lovelace"})
        done = await c.session.call_tool(
            "execute_code",
            {"code": code, "args": {"q": "Who wrote the first program?"}},
            input_responses={key: answer},
            request_state=first.request_state,
            progress_callback=on_progress,
        )
    assert heard == ["about to ask"]  # sent in the first round, not again after the answer
    ran = _payload(done)
    assert ran["status"] == "succeeded", ran
    assert ran["result"] == {"action": "accept", "name": "Ada Lovelace"}
    with ready.client() as rest:  # the same run, resumed: one execution, one tool call
        listed = rest.get("/v1/executions", params={"limit": 50}).json()["executions"]
    asked_ada = [e for e in listed if (e["result"] or {}).get("name") == "Ada Lovelace"]
    assert [(e["id"], len(e["tool_calls"])) for e in asked_ada] == [(ran["id"], 1)]
    assert origin["execution_id"] == ran["id"]


async def test_a_direct_call_round_trips_with_the_sdk_client_driving_it(ready: E2EStack) -> None:
    asked: list[types.ElicitRequestParams] = []
    url = f"{ready.gateway_url}/mcp/servers/asker"
    async with Client(url, elicitation_callback=_answering("Grace Hopper", asked)) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("ask_name", {"question": "Who found the moth?"})
    assert _payload(result) == {"action": "accept", "name": "Grace Hopper"}
    assert [p.message for p in asked] == ["Who found the moth?"]


async def test_a_capability_run_round_trips_a_sampling_question(ready: E2EStack) -> None:
    code = 'return await mcp.asker.ask_model(prompt=args["prompt"])'
    with ready.client() as rest:
        created = rest.post("/v1/capabilities", json={"code": code, "intent": "ask the model"})
    assert created.status_code == 201, created.text
    prompts: list[str] = []

    async def sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        block = params.messages[0].content
        prompts.append(block.text if isinstance(block, types.TextContent) else "")
        text = types.TextContent(type="text", text="forty-two")
        return types.CreateMessageResult(role="assistant", content=text, model="test-model")

    async with Client(f"{ready.gateway_url}/mcp", sampling_callback=sampling) as client:
        done = await client.call_tool(
            "execute_capability",
            {"capability_id": created.json()["id"], "args": {"prompt": "the answer?"}},
        )
    ran = _payload(done)
    assert ran["status"] == "succeeded", ran
    assert ran["result"] == {"text": "forty-two"} and prompts == ["the answer?"]


async def test_a_2026_07_28_client_without_the_capability_gets_the_tool_refused(
    ready: E2EStack,
) -> None:
    code = """
try:
    await mcp.asker.ask_name(question="Name?")
except Exception as exc:  # ToolCallError
    return exc.message
"""
    async with Client(f"{ready.gateway_url}/mcp") as client:
        ran = _payload(await client.call_tool("execute_code", {"code": code}))
    assert ran["status"] == "succeeded", ran
    assert "did not declare the elicitation capability" in ran["result"]
    assert "-32021" in ran["result"]


async def test_a_2025_11_25_client_gets_the_question_over_its_session(ready: E2EStack) -> None:
    asked: list[types.ElicitRequestParams] = []
    async with mcp_session(ready, elicitation_callback=_answering("Alan Turing", asked)) as session:
        done = await session.call_tool("execute_code", {"code": ASK, "args": {"q": "Who?"}})
    ran = _payload(done)
    assert ran["status"] == "succeeded", ran
    assert ran["result"] == {"action": "accept", "name": "Alan Turing"}
    assert [p.message for p in asked] == ["Who?"]


async def test_a_tampered_or_misused_request_state_is_refused_and_the_run_still_waits(
    ready: E2EStack,
) -> None:
    arguments = {"code": ASK, "args": {"q": "Name?"}}
    async with Client(f"{ready.gateway_url}/mcp", elicitation_callback=_answering("x", [])) as c:
        first = await _first_round(c, "Name?")
        state = first.request_state or ""
        key = next(iter(first.input_requests or {}))
        answer: types.InputResponses = {
            key: types.ElicitResult(action="accept", content={"name": "Barbara Liskov"})
        }
        tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
        with pytest.raises(MCPError) as refused:
            await c.session.call_tool(
                "execute_code", arguments, input_responses=answer, request_state=tampered
            )
        assert refused.value.error.code == types.INVALID_PARAMS
        assert "requestState" in refused.value.error.message
        # The state is bound to the call's arguments: replayed on other code, refused too.
        with pytest.raises(MCPError, match="requestState"):
            other = {"code": "return 1", "args": {"q": "Name?"}}
            await c.session.call_tool(
                "execute_code", other, input_responses=answer, request_state=state
            )
        # Answers missing: refused naming the key, nothing delivered.
        with pytest.raises(MCPError, match=key) as missing:
            await c.session.call_tool("execute_code", arguments, request_state=state)
        assert (missing.value.error.data or {})["type"] == "invalid_request_state"
        # Nothing was lost: the genuine retry still finishes the run.
        done = await c.session.call_tool(
            "execute_code", arguments, input_responses=answer, request_state=state
        )
    ran = _payload(done)
    assert ran["status"] == "succeeded", ran
    assert ran["result"]["name"] == "Barbara Liskov"


async def test_a_client_that_answers_after_the_runs_deadline_finds_the_run_ended(
    ready: E2EStack,
) -> None:
    # The sandbox does not wait for a client past the run's own timeout_s: the run ends at
    # its deadline, and the late retry is refused saying the tool stopped waiting.
    arguments = {"code": ASK, "args": {"q": "Still there?"}, "timeout_s": 2}
    async with Client(f"{ready.gateway_url}/mcp", elicitation_callback=_answering("x", [])) as c:
        first = await c.session.call_tool("execute_code", arguments, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        key = next(iter(first.input_requests or {}))
        run_id = (first.meta or {})["agentcards/origin"][key]["execution_id"]

        def ended() -> bool:
            with ready.client() as rest:
                status = rest.get(f"/v1/executions/{run_id}").json()["status"]
            return status not in ("queued", "running")

        wait_until(ended, what="the unanswered run to reach its deadline")
        late: types.InputResponses = {
            key: types.ElicitResult(action="accept", content={"name": "x"})
        }
        with pytest.raises(MCPError, match="stopped waiting") as refused:
            await c.session.call_tool(
                "execute_code", arguments, input_responses=late, request_state=first.request_state
            )
    assert (refused.value.error.data or {})["execution_id"] == run_id
    with ready.client() as rest:
        ran = rest.get(f"/v1/executions/{run_id}").json()
    assert ran["status"] in ("timeout", "failed"), ran


def _post(client: httpx.Client, transcript: list[Any], body: dict[str, Any]) -> dict[str, Any]:
    """One 2026-07-28 request as a plain HTTP client sends it; its JSON-RPC reply (the last
    message when the server streams)."""
    params = body["params"]
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": body["method"],
        "Mcp-Name": params["name"],
    }
    response = client.post("/mcp", json=body, headers=headers)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        lines = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        reply = dict(json.loads(lines[-1]))
    else:
        reply = dict(response.json())
    transcript += [body, reply]
    return reply


def test_a_plain_http_client_round_trips_and_the_wire_reads_as_the_spec_says(
    ready: E2EStack,
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "transcript", "version": "1"},
    }
    arguments = {"code": ASK, "args": {"q": "Your name?"}}
    call = {"name": "execute_code", "arguments": arguments, "_meta": meta}
    transcript: list[Any] = []
    with ready.client() as client:
        first = _post(
            client, transcript, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
        )
        asked = first["result"]
        assert asked["resultType"] == "input_required", first
        (key, request), *_ = asked["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Your name?"
        answer = {"action": "accept", "content": {"name": "Katherine Johnson"}}
        retry = {**call, "inputResponses": {key: answer}, "requestState": asked["requestState"]}
        done = _post(
            client, transcript, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": retry}
        )
    ran = done["result"]["structuredContent"]
    assert done["result"].get("resultType", "complete") == "complete"
    assert ran["status"] == "succeeded" and ran["result"]["name"] == "Katherine Johnson", ran
    print(json.dumps(transcript, indent=1))  # docs/mcp-input-required.md shows it


@pytest.mark.parametrize(
    ("mode", "name", "arguments"),
    [
        ("code", "execute_code", {"code": ASK, "args": {"q": "Name?"}}),
        ("both", "asker.ask_name", {"question": "Name?"}),
    ],
)
def test_a_call_that_fails_for_an_undeclared_capability_is_refused_with_32021(
    ready: E2EStack, mode: str, name: str, arguments: dict[str, Any]
) -> None:
    # /mcp in code mode (a sandboxed run whose tool elicits, uncaught) and in both mode (the
    # tool called directly): the client declared no elicitation, so it gets MCP's own refusal
    # naming the capability, as /mcp/servers/<name> gives, not the run's failure.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    with ready.client() as client:
        response = client.post("/mcp", params={"mode": mode}, json=body, headers=headers)
    assert response.status_code == 400, response.text
    reply = response.json()
    assert reply["id"] == 7 and reply["error"]["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert reply["error"]["data"]["requiredCapabilities"] == {"elicitation": {}}, reply
    assert "elicitation" in reply["error"]["message"]
