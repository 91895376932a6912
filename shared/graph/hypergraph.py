"""Cytoscape elements for the dashboard: the hypergraph (capabilities holding their tools) and the tool graph.

Pure: rows in (tools, capabilities, ``tool_edges``), ``{"data": ...}`` elements out. A
capability is a compound node; each tool it uses is a child of its own (one instance per
capability, id ``<capability node>/<tool id>``), because a Cytoscape node has one parent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from shared.graph.edges import capability_node
from shared.graph.weights import EdgeKind

Row = Mapping[str, Any]
Element = dict[str, Any]
TOOL_EDGE_KINDS = (EdgeKind.SEQUENCE, EdgeKind.CO_USED)


def _server(tool_id: str, tool: Row | None) -> str:
    return str(tool["server"]) if tool and tool.get("server") else tool_id.partition(":")[0]


def _tool_data(tool_id: str, tool: Row | None) -> dict[str, Any]:
    """What the page shows of a tool: short label, server (its colour), availability, metrics."""
    return {
        "tool": tool_id,
        "label": tool_id.partition(":")[2] or tool_id,
        "server": _server(tool_id, tool),
        "available": bool(tool["available"]) if tool else False,  # unknown: removed or renamed
        "pagerank": float(tool.get("pagerank") or 0.0) if tool else 0.0,
        "community": tool.get("community") if tool else None,
    }


def _edge(edge_id: str, source: str, target: str, kind: str, **data: Any) -> Element:
    return {"data": {"id": edge_id, "source": source, "target": target, "kind": kind, **data}}


@dataclass(frozen=True)
class HypergraphBuilder:
    """Capabilities as compound parents with their tools as children; links between them.

    Edges: ``sequence`` tool→tool inside a capability (both tools its own); ``shares``
    between two capabilities using a common tool (``shared`` lists them, weight = how many);
    ``calls`` from a capability to one it calls inline. Edges to nodes not in the graph
    (another tenant's or a pruned capability) are left out, so every endpoint exists.
    """

    tools: Sequence[Row]
    capabilities: Sequence[Row]
    edges: Sequence[Row]

    def build(self) -> dict[str, Any]:
        """``{nodes, edges, capabilities_count, tools_count}`` ready for ``cytoscape({elements})``."""
        tools = {str(t["id"]): t for t in self.tools}
        used = {capability_node(str(c["id"])): _tool_ids(c) for c in self.capabilities}
        nodes = [self._capability(c) for c in self.capabilities]
        for parent, tool_ids in used.items():
            nodes += [
                {
                    "data": {
                        "id": f"{parent}/{t}",
                        "parent": parent,
                        "kind": "tool",
                        **_tool_data(t, tools.get(t)),
                    }
                }
                for t in tool_ids
            ]
        edges = self._inside(used) + _shares(used) + self._calls(used)
        distinct = {t for tool_ids in used.values() for t in tool_ids}
        return {
            "nodes": nodes,
            "edges": edges,
            "capabilities_count": len(used),
            "tools_count": len(distinct),
        }

    @staticmethod
    def _capability(cap: Row) -> Element:
        return {
            "data": {
                "id": capability_node(str(cap["id"])),
                "kind": "capability",
                "capability_id": str(cap["id"]),
                "label": cap["name"],
                "usage_count": cap.get("usage_count", 0),
                "success_rate": cap.get("success_rate", 0.0),
                "pagerank": float(cap.get("pagerank") or 0.0),
                "community": cap.get("community"),
                "tools": _tool_ids(cap),
            }
        }

    def _inside(self, used: Mapping[str, list[str]]) -> list[Element]:
        sequence: dict[tuple[str, str], float] = {}
        for e in self.edges:
            if e["kind"] == EdgeKind.SEQUENCE and e["src"] != e["dst"]:
                sequence[(e["src"], e["dst"])] = float(e.get("weight") or 1.0)
        out = []
        for parent, tool_ids in used.items():
            mine = set(tool_ids)
            for (src, dst), weight in sorted(sequence.items()):
                if src in mine and dst in mine:
                    a, b = f"{parent}/{src}", f"{parent}/{dst}"
                    out.append(_edge(f"{a}->{b}", a, b, EdgeKind.SEQUENCE, weight=weight))
        return out

    def _calls(self, used: Mapping[str, list[str]]) -> list[Element]:
        pairs = {
            (e["src"], e["dst"]): float(e.get("weight") or 1.0)
            for e in self.edges
            if e["kind"] == EdgeKind.CALLS and e["src"] != e["dst"]
        }
        return [
            _edge(f"calls:{src}->{dst}", src, dst, EdgeKind.CALLS, weight=weight)
            for (src, dst), weight in sorted(pairs.items())
            if src in used and dst in used
        ]


def _tool_ids(cap: Row) -> list[str]:
    """A capability's tools, each once, in its own order."""
    return list(dict.fromkeys(str(t) for t in cap.get("tools_used") or []))


def _shares(used: Mapping[str, list[str]]) -> list[Element]:
    """One ``shares`` edge per pair of capabilities with a tool in common (via a tool index:
    no all-pairs scan of capabilities that share nothing)."""
    by_tool: dict[str, list[str]] = defaultdict(list)
    for parent, tool_ids in used.items():
        for t in tool_ids:
            by_tool[t].append(parent)
    shared: dict[tuple[str, str], list[str]] = defaultdict(list)
    for tool_id, parents in sorted(by_tool.items()):
        for a, b in combinations(sorted(parents), 2):
            shared[(a, b)].append(tool_id)
    return [
        _edge(f"shares:{a}|{b}", a, b, "shares", shared=tools, weight=len(tools))
        for (a, b), tools in sorted(shared.items())
    ]


def tool_graph(*, tools: Sequence[Row], edges: Iterable[Row]) -> dict[str, Any]:
    """Every tool (PageRank, community, server) and the tool→tool edges among them, by kind."""
    known = {str(t["id"]): t for t in tools}
    nodes = [{"data": {"id": t, "kind": "tool", **_tool_data(t, row)}} for t, row in known.items()]
    out = [
        _edge(
            f"{e['kind']}:{e['src']}->{e['dst']}",
            e["src"],
            e["dst"],
            e["kind"],
            weight=float(e.get("weight") or 1.0),
            count=e.get("count", 1),
        )
        for e in edges
        if e["kind"] in TOOL_EDGE_KINDS and e["src"] in known and e["dst"] in known
    ]
    return {"nodes": nodes, "edges": out, "tools_count": len(nodes)}
