"""One rule for tool ids and server names, and the same verdict at config, gateway and RPC."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.toolhost.servers import parse_servers
from shared import tool_ids
from shared.errors import ConfigError
from shared.executions.models import ExecutionRequest
from shared.rpc.protocol import RpcRequest

SERVER_NAMES = {
    "example": True,
    "google-maps": True,  # dashes are common in mcpServers files
    "my_server2": True,
    "A" * 64: True,
    "a.b": False,  # would read as mcp.a.b: server a, tool b
    "a:b": False,
    "-x": False,
    "a b": False,
    "": False,
    "A" * 65: False,
}
TOOL_IDS = {
    "example:add": True,
    "srv:get-x": True,
    "srv:get.x": True,  # the MCP spec allows dots in tool names
    "srv:" + "t" * 128: True,
    "_bench:echo": True,  # in-process servers
    "srv:get/x": False,  # not in the MCP tool-name rule
    "a.b:x": False,
    "srv:": False,
    ":x": False,
    "srv:a:b": False,
    "srv:get x": False,
    "srv:" + "t" * 129: False,
    "no-colon": False,
}


@pytest.mark.parametrize(("name", "ok"), SERVER_NAMES.items())
def test_server_names(name: str, ok: bool) -> None:
    assert tool_ids.is_server_name(name) is ok


@pytest.mark.parametrize(("tool_id", "ok"), TOOL_IDS.items())
def test_tool_ids(tool_id: str, ok: bool) -> None:
    assert tool_ids.is_tool_id(tool_id) is ok
    if ok:
        server, name = tool_ids.parse(tool_id)
        assert tool_ids.make(server, name) == tool_id
    else:
        with pytest.raises(ValueError, match="tool ids look like 'server:tool'; server names"):
            tool_ids.parse(tool_id)


def test_python_names_map_dashes_and_dots() -> None:
    assert tool_ids.same_python_name("google-maps:search", "google_maps:search")
    assert tool_ids.python_id("my-server:get-sum") == "my_server:get_sum"
    assert tool_ids.python_id("s:v1.list-all") == "s:v1_list_all"
    assert not tool_ids.same_python_name("s:get_sum", "s:getsum")


def test_python_name_clashes_keep_the_first_listed() -> None:
    names = ["get-sum", "echo", "get_sum", "get.sum", "list"]
    assert tool_ids.python_name_clashes(names) == {"get-sum": ["get_sum", "get.sum"]}
    assert tool_ids.python_name_clashes(["a", "b-c"]) == {}


@pytest.mark.parametrize(("name", "ok"), SERVER_NAMES.items())
def test_config_accepts_exactly_the_rule(name: str, ok: bool) -> None:
    config: dict[str, Any] = {"mcpServers": {name: {"command": "x"}}}
    if ok:
        assert list(parse_servers(config)) == [name]
    else:
        with pytest.raises(ConfigError, match="no dots or colons"):
            parse_servers(config)


def test_config_reserves_a_leading_underscore() -> None:
    with pytest.raises(ConfigError, match="reserved for in-process servers"):
        parse_servers({"mcpServers": {"_bench": {"command": "x"}}})


def test_config_reserves_the_capability_prefix() -> None:
    with pytest.raises(ConfigError, match="names a capability in the tool graph"):
        parse_servers({"mcpServers": {"cap": {"command": "x"}}})
    assert list(parse_servers({"mcpServers": {"caps": {"command": "x"}}})) == ["caps"]


@pytest.mark.parametrize(("tool_id", "ok"), TOOL_IDS.items())
def test_gateway_accepts_exactly_the_rule(tool_id: str, ok: bool) -> None:
    if ok:
        assert ExecutionRequest(code="1", tools=[tool_id]).tools == [tool_id]
    else:
        with pytest.raises(ValidationError, match="tool ids look like 'server:tool'"):
            ExecutionRequest(code="1", tools=[tool_id])


@pytest.mark.parametrize(("tool_id", "ok"), TOOL_IDS.items())
def test_rpc_accepts_exactly_the_rule(tool_id: str, ok: bool) -> None:
    fields = {"call_id": "c1", "execution_id": "e1", "tool": tool_id, "deadline": 1e9}
    if ok:
        request = RpcRequest.model_validate(fields)
        assert (request.server, request.tool_name) == tuple(tool_ids.parse(tool_id))
    else:
        with pytest.raises(ValidationError, match="tool ids look like 'server:tool'"):
            RpcRequest.model_validate(fields)
