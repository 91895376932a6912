"""Large results and stdout reach the official MCP SDK client: cut to fit, marked, readable in pages.

The SDK's streamable HTTP client refuses a server-sent event over 1 MiB
(``DEFAULT_MAX_SSE_EVENT_SIZE``); before the cap a 3 MB result or 1 MiB of stdout failed the
call and the client never learned the execution's id. Now the reply stays under
AGENTCARDS_MCP_REPLY_MAX_BYTES, names what it left out with its full size, and paging through
``get_execution`` gives back exactly what REST's GET holds.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE
from mcp.types import LoggingMessageNotificationParams

from tests.integration.mcp_servers import time_server
from tests.stack import E2EStack, mcp_session, stack_fixture

REPLY_CAP = 256 << 10  # the default of AGENTCARDS_MCP_REPLY_MAX_BYTES

stack = stack_fixture(lambda tmp: {"time": time_server()}, learning=False)

# ~3.4 MB of JSON with two-byte characters, so a page boundary could split one.
BIG_RESULT = """
return {"rows": [{"i": i, "text": "é" * 1000 + str(i)} for i in range(1700)], "done": True}
"""
EXPECTED_RESULT = {
    "rows": [{"i": i, "text": "é" * 1000 + str(i)} for i in range(1700)],
    "done": True,
}
# More than the sandbox keeps (1 MiB): the stored stdout is the first MiB, marked truncated.
BIG_STDOUT = """
for i in range(12000):
    print(f"line {i:05d} " + "ü\\"\\t" * 30)
return "printed"
"""


def _wire_bytes(data: dict[str, Any]) -> int:
    """The structured content and its text copy, as the reply carries both."""
    compact = json.dumps(data, ensure_ascii=False)
    return len(compact.encode()) + len(json.dumps(compact, ensure_ascii=False).encode())


async def _read_all(session: ClientSession, execution_id: str, part: str, size: int) -> str:
    """Every page of ``part`` through get_execution, joined."""
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        reply = await session.call_tool(
            "get_execution",
            {"execution_id": execution_id, "part": part, "offset": offset, "max_bytes": size},
        )
        assert not reply.is_error, reply.content
        data = reply.structured_content or {}
        assert _wire_bytes(data) <= REPLY_CAP
        page = data["page"]
        assert page["part"] == part and page["offset"] == offset
        pages.append(page["text"])
        offset = page["next_offset"]
    return "".join(pages)


def _rest_view(stack: E2EStack, execution_id: str) -> dict[str, Any]:
    with stack.client() as client:
        response = client.get(f"/v1/executions/{execution_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_3_mb_result_comes_back_cut_and_pages_rebuild_it(stack: E2EStack) -> None:
    assert DEFAULT_MAX_SSE_EVENT_SIZE == 1 << 20  # the SDK limit the cap stays under
    async with mcp_session(stack) as session:
        ran = await session.call_tool("execute_code", {"code": BIG_RESULT})
        assert not ran.is_error, ran.content
        data = ran.structured_content or {}
        assert data["status"] == "succeeded" and data["id"]
        assert _wire_bytes(data) <= REPLY_CAP
        assert data["result"] is None
        full = json.dumps(EXPECTED_RESULT, ensure_ascii=False, separators=(",", ":"))
        [cut] = data["truncated"]["parts"]
        assert cut == {
            "part": "result",
            "total_bytes": len(full.encode()),
            "inline_bytes": 0,
            "next_offset": 0,
        }
        message = data["truncated"]["message"]
        assert "AGENTCARDS_MCP_REPLY_MAX_BYTES" in message and "get_execution" in message
        assert json.loads(ran.content[0].text)["truncated"] == data["truncated"]  # text copy too

        text = await _read_all(session, data["id"], "result", 100_001)  # odd: splits an é
        assert json.loads(text) == EXPECTED_RESULT
        # Read without `part`, get_execution is cut the same way (and not an error).
        again = await session.call_tool("get_execution", {"execution_id": data["id"]})
        assert not again.is_error and again.structured_content
        assert again.structured_content["truncated"]["parts"][0]["part"] == "result"
    assert _rest_view(stack, data["id"])["result"] == EXPECTED_RESULT  # REST: whole


async def test_over_a_mib_of_stdout_comes_back_cut_and_pages_rebuild_it(stack: E2EStack) -> None:
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with mcp_session(stack, logging_callback=on_log) as session:
        await session.set_logging_level("info")  # the stdout log line comes too
        ran = await session.call_tool("execute_code", {"code": BIG_STDOUT})
        assert not ran.is_error, ran.content
        data = ran.structured_content or {}
        assert data["result"] == "printed" and data["stdout_truncated"]
        assert _wire_bytes(data) <= REPLY_CAP
        stored = _rest_view(stack, data["id"])["stdout"]
        assert len(stored.encode()) > 1_000_000
        [cut] = data["truncated"]["parts"]
        assert cut["part"] == "stdout" and cut["total_bytes"] == len(stored.encode())
        assert 0 < cut["inline_bytes"] == cut["next_offset"] < cut["total_bytes"]
        assert stored.encode()[: cut["inline_bytes"]].decode() == data["stdout"]

        rest = await _read_all(session, data["id"], "stdout", 200_000)  # capped to fit
        assert rest == stored
    stdout_lines = [log for log in logs if log.logger == "agentcards.stdout"]
    assert len(stdout_lines) == 1
    assert "get_execution" in stdout_lines[0].data["message"]
    assert len(json.dumps(stdout_lines[0].data).encode()) < DEFAULT_MAX_SSE_EVENT_SIZE


def test_rest_reads_a_part_in_pages_too(stack: E2EStack) -> None:
    with stack.client() as client:
        done = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": BIG_RESULT}
        ).json()
        text, offset = "", 0
        while offset is not None:
            response = client.get(
                f"/v1/executions/{done['id']}",
                params={"part": "result", "offset": offset, "max_bytes": 1_000_000},
            )
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["result"] is None
            text += body["page"]["text"]
            offset = body["page"]["next_offset"]
        inside = text.encode().index("é".encode()) + 1  # the second byte of a character
        refused = client.get(
            f"/v1/executions/{done['id']}", params={"part": "result", "offset": inside}
        )
    assert json.loads(text) == EXPECTED_RESULT
    assert refused.status_code == 422, refused.text
    assert f"offset {inside} falls inside a character" in refused.json()["error"]["message"]
