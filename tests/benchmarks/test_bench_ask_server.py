"""`bench input-required`'s MCP server, started from the config the bench writes, as the
toolhost would: its tool elicits and returns the answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client

from deploy.bench.ask_server import SERVER, write_config
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
