"""The benchmarks' MCP server, started from the config the benches write, as the toolhost would."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from deploy.bench.echo_server import SERVER, write_config
from services.toolhost.servers import StdioServer, load_servers


async def test_the_written_config_serves_echo_whatever_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # away from the checkout: the config's cwd must find it
    config = load_servers(write_config(tmp_path / "mcp.json", agentcards={"cache": {"ttl_s": 0}}))
    server = config[SERVER]
    assert isinstance(server, StdioServer)
    # Like the toolhost: the SDK's minimal environment (no PYTHONPATH), cwd from the config.
    params = StdioServerParameters(command=server.command, args=server.args, cwd=server.cwd)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == ["echo"]
        assert listed[0].annotations is not None and listed[0].annotations.read_only_hint
        result = await session.call_tool("echo", {"n": 7})
    assert not result.is_error and result.structured_content == {"n": 7}
