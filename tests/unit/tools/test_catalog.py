"""Tool names in agent code: Python spellings resolve to real ids; unknown and out-of-scope differ."""

from __future__ import annotations

from shared.tools.catalog import ToolCatalog

KNOWN = [
    "everything:get-sum",
    "everything:echo",
    "my-server:list.all",
    "time:get_current_time",
    "time:convert_time",
    "example:add",
]


def test_python_spellings_resolve_to_the_real_id() -> None:
    catalog = ToolCatalog.build(KNOWN, KNOWN)
    assert catalog.resolve("everything:get_sum") == ("everything:get-sum", None)
    assert catalog.resolve("everything:get-sum") == ("everything:get-sum", None)  # subscript
    assert catalog.resolve("my_server:list_all") == ("my-server:list.all", None)
    assert catalog.resolve("time:convert_time") == ("time:convert_time", None)


def test_an_existing_tool_outside_the_scope_is_not_allowed() -> None:
    catalog = ToolCatalog.build(["time:get_current_time"], KNOWN)
    tool, error = catalog.resolve("everything:get_sum")
    assert tool == "everything:get-sum"
    assert error is not None and error["type"] == "tool_not_allowed"
    assert "'everything:get-sum'" in error["message"]


def test_unknown_tools_name_the_nearest_known_ones() -> None:
    catalog = ToolCatalog.build(KNOWN, KNOWN)
    _, typo = catalog.resolve("time:get_curent_time")
    assert typo is not None and typo["type"] == "unknown_tool"
    assert typo["suggestions"][0] == "time:get_current_time"
    assert "MCP server 'time' has no tool 'get_curent_time'" in typo["message"]
    assert "did you mean time:get_current_time" in typo["message"]

    _, nosuch = catalog.resolve("time:nosuch")  # nothing close: the server's own tools
    assert nosuch is not None and nosuch["type"] == "unknown_tool"
    assert set(nosuch["suggestions"]) == {"time:convert_time", "time:get_current_time"}

    _, server = catalog.resolve("nosuch:tool")
    assert server is not None and server["type"] == "unknown_tool"
    assert "no MCP server named 'nosuch'" in server["message"]
    assert "everything, example, my-server, time" in server["message"]

    _, sum_typo = catalog.resolve("everything:get_summ")
    assert sum_typo is not None and sum_typo["suggestions"][0] == "everything:get-sum"


def test_without_a_registry_everything_outside_the_scope_is_not_allowed() -> None:
    catalog = ToolCatalog.build(["t:echo"])
    assert catalog.resolve("t:echo") == ("t:echo", None)
    _, error = catalog.resolve("secrets:dump")
    assert error is not None and error["type"] == "tool_not_allowed"
    _, malformed = catalog.resolve("a.b:x")
    assert malformed is not None and malformed["type"] == "tool_not_allowed"
    assert "tool ids look like 'server:tool'" in malformed["message"]


def test_a_server_awaiting_a_connection_lets_its_calls_through_others_stay_unknown() -> None:
    catalog = ToolCatalog.build(KNOWN, KNOWN, awaiting=["my-tickets"])
    assert catalog.resolve("my-tickets:whoami") == ("my-tickets:whoami", None)
    assert catalog.resolve("my_tickets:whoami") == ("my-tickets:whoami", None)  # Python name
    _, other = catalog.resolve("tickets2:whoami")
    assert other is not None and other["type"] == "unknown_tool"
    _, typo = catalog.resolve("time:get_curent_time")  # a server whose tools are known
    assert typo is not None and typo["type"] == "unknown_tool"
