"""`bench input-required`'s MCP server, started from the config the bench writes, as the
toolhost would: its tool elicits and returns the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client

from deploy.bench.ask_server import SERVER, STATELESS_SERVER, write_config
from services.toolhost import rounds
from services.toolhost.servers import StdioServer, load_servers


async def test_the_written_config_serves_an_eliciting_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # away from the checkout: the config's cwd must find it
    server = load_servers(write_config(tmp_path / "mcp.json"))[SERVER]
    assert isinstance(server, StdioServer)
    asked: list[str] = []

    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "bench"})

    params = StdioServerParameters(command=server.command, args=server.args, cwd=server.cwd)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, elicitation_callback=elicitation) as session,
    ):
        await session.initialize()
        result = await session.call_tool("ask", {"question": "name?"})
    assert not result.is_error and result.structured_content == {
        "action": "accept",
        "name": "bench",
    }
    assert asked == ["name?"]


async def test_the_second_entry_is_spoken_to_at_2026_07_28_and_asks_with_a_result(
    tmp_path: Path,
) -> None:
    """``asker26`` negotiates 2026-07-28 as the toolhost would, and ``ask_stateless`` asks
    under its own key ``name`` in an InputRequiredResult, answered on the retry."""
    servers = load_servers(write_config(tmp_path / "mcp.json"))
    server = servers[STATELESS_SERVER]
    assert isinstance(server, StdioServer) and server.protocol == "auto"
    assert servers[SERVER].protocol == "2025-11-25"
    asked: list[str] = []

    async def answer(
        key: str, request: types.InputRequest, batch: tuple[str, int]
    ) -> types.InputResponse:
        asked.append(key)
        return types.ElicitResult(action="accept", content={"name": "bench"})

    params = StdioServerParameters(command=server.command, args=server.args, cwd=server.cwd)
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await rounds.negotiate(session, server.protocol)
        assert session.protocol_version == "2026-07-28"
        with rounds.declaring(["elicitation"]):
            result = await rounds.call_tool(
                session, "ask_stateless", {"question": "name?"}, answer=answer
            )
    assert result.structured_content == {"action": "accept", "name": "bench"}
    assert asked == ["name"]
