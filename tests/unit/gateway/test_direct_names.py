"""The direct surface's names: ``<server>.<tool>`` on the aggregate views, or each tool's own
name where no other listed tool has it (bare naming), and the code of a call."""

from __future__ import annotations

import itertools
import re

import pytest
from starlette.requests import Request

from services.gateway.mcp.direct import naming_of
from services.gateway.ops.direct import (
    MAX_TOOL_NAME,
    DirectTool,
    _on_awaiting,
    aggregate_name,
    direct_code,
    listed_names,
)
from shared.errors import ValidationFailed

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


def _tool(tool_id: str) -> DirectTool:
    server, _, name = tool_id.partition(":")
    return DirectTool(
        id=tool_id,
        server=server,
        name=name,
        description="",
        input_schema={"type": "object"},
        output_schema=None,
        annotations={},
    )


def test_bare_names_keep_a_tool_s_own_name_and_prefix_only_the_colliding_ones() -> None:
    tools = [_tool("time:now"), _tool("a:echo"), _tool("b:echo"), _tool("b:sum")]
    assert listed_names(tools, naming="bare") == {
        "time:now": "now",
        "a:echo": "a.echo",
        "b:echo": "b.echo",
        "b:sum": "sum",
    }
    # prefixed (the default view) is aggregate_name for every tool, colliding or not.
    assert listed_names(tools, naming="prefixed") == {
        tool.id: aggregate_name(tool.server, tool.name) for tool in tools
    }


def test_a_bare_name_never_takes_a_code_mode_tool_s_name() -> None:
    tools = [_tool("runner:execute_code"), _tool("runner:other")]
    names = listed_names(tools, naming="bare", reserved={"execute_code", "search_tools"})
    assert names == {"runner:execute_code": "runner.execute_code", "runner:other": "other"}


def test_a_bare_name_that_is_another_tool_s_fallback_falls_back_too() -> None:
    # a:x and b:x collide, so a:x is listed as a.x, which server c's tool named "a.x" would
    # otherwise also be: it falls back too, and every listed name is listed once.
    tools = [_tool("a:x"), _tool("b:x"), _tool("c:a.x"), _tool("c:y")]
    names = listed_names(tools, naming="bare")
    assert names == {"a:x": "a.x", "b:x": "b.x", "c:a.x": "c.a.x", "c:y": "y"}
    assert len(set(names.values())) == len(names)


def test_bare_names_depend_on_the_set_of_tools_not_their_order() -> None:
    tools = [_tool("a:x"), _tool("b:x"), _tool("c:a.x"), _tool("c:y"), _tool("d:execute_code")]
    first = listed_names(tools, naming="bare", reserved={"execute_code"})
    for shuffled in itertools.permutations(tools):
        assert listed_names(shuffled, naming="bare", reserved={"execute_code"}) == first


def test_the_request_chooses_the_naming_and_a_bad_value_is_a_clear_error() -> None:
    def request(query: str = "", headers: list[tuple[bytes, bytes]] | None = None) -> Request:
        scope = {"type": "http", "query_string": query.encode(), "headers": headers or []}
        return Request(scope)

    assert naming_of(request()) == "prefixed"
    assert naming_of(object()) == "prefixed"  # stdio: no HTTP request
    assert naming_of(request("names=bare")) == "bare"
    assert naming_of(request(headers=[(b"x-agentcards-tool-names", b"bare")])) == "bare"
    with pytest.raises(ValidationFailed) as refused:
        naming_of(request("names=short"))
    assert refused.value.message == (
        "x-agentcards-tool-names (or ?names=) must be one of prefixed, bare, not 'short'"
    )
    assert refused.value.to_dict()["type"] == "validation_error"


def test_a_name_on_a_server_awaiting_a_connection_is_its_tool_others_are_not() -> None:
    awaiting = {"tickets"}
    own = _on_awaiting("tickets", "whoami", awaiting)
    assert own is not None and own.id == "tickets:whoami" and own.server == "tickets"
    aggregate = _on_awaiting(None, "tickets.whoami", awaiting)
    assert aggregate is not None and aggregate.id == "tickets:whoami"
    assert _on_awaiting("time", "whoami", awaiting) is None
    assert _on_awaiting(None, "whoami", awaiting) is None
