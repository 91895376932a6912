"""HypergraphBuilder and tool_graph: what the dashboard's three views draw."""

from __future__ import annotations

from typing import Any

from shared.graph.hypergraph import HypergraphBuilder, tool_graph

TOOLS = [
    {"id": "fs:read", "server": "fs", "available": True, "pagerank": 0.5, "community": 0},
    {"id": "fs:write", "server": "fs", "available": True, "pagerank": 0.3, "community": 0},
    {"id": "git:log", "server": "git", "available": False, "pagerank": 0.2, "community": 1},
]


def _cap(cid: str, name: str, tools: list[str]) -> dict[str, Any]:
    return {"id": cid, "name": name, "tools_used": tools, "usage_count": 3, "success_rate": 1.0}


def _by_id(elements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["data"]["id"]: e["data"] for e in elements}


def _assert_consistent(graph: dict[str, Any]) -> None:
    """Unique ids; every parent and edge endpoint is a node of the graph."""
    ids = [n["data"]["id"] for n in graph["nodes"]] + [e["data"]["id"] for e in graph["edges"]]
    assert len(ids) == len(set(ids))
    nodes = _by_id(graph["nodes"])
    for node in nodes.values():
        assert node.get("parent") is None or node["parent"] in nodes
    for edge in graph["edges"]:
        assert edge["data"]["source"] in nodes and edge["data"]["target"] in nodes


def test_a_shared_tool_is_one_child_per_capability_and_links_the_two() -> None:
    edges = [{"src": "fs:read", "dst": "fs:write", "kind": "sequence", "weight": 2.0}]
    graph = HypergraphBuilder(
        tools=TOOLS,
        capabilities=[
            _cap("a", "copy_file", ["fs:read", "fs:write"]),
            _cap("b", "show_log", ["fs:read", "git:log"]),
        ],
        edges=edges,
    ).build()
    _assert_consistent(graph)
    nodes = _by_id(graph["nodes"])
    assert nodes["cap:a"]["kind"] == "capability" and nodes["cap:a"]["label"] == "copy_file"
    children = {i: n for i, n in nodes.items() if n["kind"] == "tool" and n["tool"] == "fs:read"}
    assert {n["parent"] for n in children.values()} == {"cap:a", "cap:b"}
    assert (
        nodes["cap:b/git:log"]["server"] == "git" and nodes["cap:b/git:log"]["available"] is False
    )
    by_kind = {e["data"]["kind"]: e["data"] for e in graph["edges"]}
    assert by_kind["shares"]["source"] == "cap:a" and by_kind["shares"]["target"] == "cap:b"
    assert by_kind["shares"]["shared"] == ["fs:read"] and by_kind["shares"]["weight"] == 1
    # The sequence edge is drawn inside the capability holding both tools only.
    assert [e["data"]["source"] for e in graph["edges"] if e["data"]["kind"] == "sequence"] == [
        "cap:a/fs:read"
    ]
    assert graph["capabilities_count"] == 2 and graph["tools_count"] == 3


def test_a_nested_capability_is_its_own_compound_linked_by_calls() -> None:
    edges = [
        {"src": "cap:outer", "dst": "cap:inner", "kind": "calls", "weight": 1.0},
        {"src": "cap:outer", "dst": "cap:elsewhere", "kind": "calls", "weight": 1.0},  # not mine
        {"src": "cap:outer", "dst": "cap:outer", "kind": "calls", "weight": 1.0},
    ]
    graph = HypergraphBuilder(
        tools=TOOLS,
        capabilities=[
            _cap("outer", "backup", ["fs:read", "fs:read", "fs:write"]),
            _cap("inner", "read_it", ["fs:read"]),
        ],
        edges=edges,
    ).build()
    _assert_consistent(graph)
    calls = [e["data"] for e in graph["edges"] if e["data"]["kind"] == "calls"]
    assert [(c["source"], c["target"]) for c in calls] == [("cap:outer", "cap:inner")]
    nodes = _by_id(graph["nodes"])
    assert [i for i, n in nodes.items() if n.get("parent") == "cap:outer"] == [
        "cap:outer/fs:read",
        "cap:outer/fs:write",
    ]
    assert nodes["cap:inner/fs:read"]["parent"] == "cap:inner"


def test_an_empty_graph_has_no_elements() -> None:
    graph = HypergraphBuilder(tools=[], capabilities=[], edges=[]).build()
    assert graph == {"nodes": [], "edges": [], "capabilities_count": 0, "tools_count": 0}
    assert tool_graph(tools=[], edges=[]) == {"nodes": [], "edges": [], "tools_count": 0}


def test_a_tool_no_longer_known_still_shows_as_unavailable() -> None:
    graph = HypergraphBuilder(
        tools=[], capabilities=[_cap("a", "x", ["gone:tool"])], edges=[]
    ).build()
    child = _by_id(graph["nodes"])["cap:a/gone:tool"]
    assert child["available"] is False and child["server"] == "gone" and child["label"] == "tool"


def test_the_tool_graph_keeps_tool_edges_between_known_tools() -> None:
    edges = [
        {"src": "fs:read", "dst": "fs:write", "kind": "sequence", "weight": 2.0, "count": 4},
        {"src": "fs:read", "dst": "git:log", "kind": "co_used", "weight": 0.5, "count": 1},
        {"src": "cap:a", "dst": "fs:read", "kind": "contains", "weight": 1.0, "count": 1},
        {"src": "fs:read", "dst": "nope:x", "kind": "sequence", "weight": 1.0, "count": 1},
    ]
    graph = tool_graph(tools=TOOLS, edges=edges)
    _assert_consistent(graph)
    assert graph["tools_count"] == 3
    assert _by_id(graph["nodes"])["fs:read"]["pagerank"] == 0.5
    assert sorted(e["data"]["kind"] for e in graph["edges"]) == ["co_used", "sequence"]
