"""The direct surface's names: ``<server>.<tool>`` on the aggregate endpoint, and the code of a call."""

from __future__ import annotations

import re

from services.gateway.ops.direct import MAX_TOOL_NAME, aggregate_name, direct_code

MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def test_names_are_server_dot_tool_and_cannot_collide() -> None:
    assert aggregate_name("time", "get_current_time") == "time.get_current_time"
    # `__` or `-` separators collide (server `a__b` + `c` vs `a` + `b__c`); server names hold
    # no dot, so the first dot always ends the server.
    assert aggregate_name("a__b", "c") != aggregate_name("a", "b__c")
    assert aggregate_name("my-server", "get.sum") == "my-server.get.sum"
    assert aggregate_name("my-server", "get.sum").partition(".")[0] == "my-server"


def test_a_name_over_mcp_s_limit_is_cut_and_keeps_a_hash_of_the_whole() -> None:
    server, long_a, long_b = "s" * 64, "t" * 100 + "a", "t" * 100 + "b"
    a, b = aggregate_name(server, long_a), aggregate_name(server, long_b)
    assert len(a) == len(b) == MAX_TOOL_NAME and a != b
    assert MCP_TOOL_NAME.match(a) and a.startswith(server + ".")


def test_a_direct_call_runs_the_tool_with_its_arguments() -> None:
    code = direct_code("my-server:get.sum")
    assert "return await mcp['my-server']['get.sum'](**args)" in code
