"""Suggestion engine: capabilities of the context's Louvain community, related and next tools.

Lazy suggestions: everything was learned, but only capabilities whose combined
score (success_rate * 0.6 + normalised usage * 0.4) reaches the adaptive
``suggestions`` threshold are offered. Tools need graph evidence instead: a shared
neighbourhood (Adamic-Adar) or an observed "comes next" edge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg

from shared.auth.patterns import compile_patterns
from shared.capabilities.store import community_capabilities, max_usage_count
from shared.config import DEFAULT_TENANT
from shared.graph.edges import CAPABILITY_PREFIX
from shared.graph.metrics import adamic_adar, build_graph, out_neighbours, undirected_projection
from shared.matching.availability import missing_tools, unavailable_tools
from shared.matching.thresholds import Context, get_threshold
from shared.search.graph_signals import load_neighbourhood
from shared.tools.store import get_tools

MAX_SUGGESTIONS = 5  # a few the agent will read, best first; more is noise
SUCCESS_WEIGHT = 0.6  # score = success_rate * 0.6 + normalized_usage * 0.4: reliability first
USAGE_WEIGHT = 0.4
CAPABILITIES_PER_COMMUNITY = 10  # read before filtering; at most 5 survive anyway
RELATED_PER_TOOL = 3  # Adamic-Adar neighbours per context tool
NEXT_TOOLS = 2  # out-neighbours of the last context tool: its likely next steps
# Adamic-Adar of 2 (two common neighbours of degree e²) reads as full confidence.
AA_FULL_CONFIDENCE = 2.0


def combined_score(*, success_rate: float, usage_count: int, max_usage: int) -> float:
    """success_rate * 0.6 + (usage / max usage) * 0.4, in [0, 1]."""
    normalized = usage_count / max_usage if max_usage > 0 else 0.0
    return SUCCESS_WEIGHT * success_rate + USAGE_WEIGHT * min(1.0, normalized)


def dominant_community(communities: Sequence[int | None]) -> int | None:
    """The most frequent community among the context tools (ties: the smaller id)."""
    counts = Counter(c for c in communities if c is not None)
    if not counts:
        return None
    return min(counts, key=lambda c: (-counts[c], c))


def suggest(
    conn: psycopg.Connection[Any],
    *,
    context_tools: Sequence[str],
    tenant_id: str = DEFAULT_TENANT,
    limit: int = MAX_SUGGESTIONS,
    tool_patterns: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """At most ``limit`` suggestions {type, id, name, score, reason}, best first, deduplicated.

    Tools that cannot be called now are left out; capabilities that use one are kept,
    marked ``degraded`` with their ``missing_tools``, after every runnable suggestion.
    With ``tool_patterns`` (the caller's allow-list), tools outside it and capabilities
    calling one are left out: only what the caller may run is suggested.
    """
    context = list(dict.fromkeys(t for t in context_tools if t))
    if not context:
        return []
    capabilities = _community_capabilities(conn, context=context, tenant_id=tenant_id)
    tools = _graph_tools(conn, context=context)
    if tool_patterns is not None:
        scope = compile_patterns(tool_patterns)
        tools = [t for t in tools if scope.allows(t["id"])]
        capabilities = [c for c in capabilities if all(map(scope.allows, c["tools_used"]))]
    unavailable = unavailable_tools(
        conn,
        tool_ids=[*(t["id"] for t in tools), *(u for c in capabilities for u in c["tools_used"])],
    )
    for cap in capabilities:
        cap["missing_tools"] = missing_tools(cap.pop("tools_used"), unavailable=unavailable)
        cap["degraded"] = bool(cap["missing_tools"])
    found = [*capabilities, *(t for t in tools if t["id"] not in unavailable)]
    found.sort(key=lambda s: (s.get("degraded", False), -s["score"], s["type"], s["id"]))
    seen: set[str] = set(context)
    out: list[dict[str, Any]] = []
    for item in found:
        if item["id"] in seen:
            continue
        seen.add(item["id"])
        out.append(item)
        if len(out) >= min(limit, MAX_SUGGESTIONS):
            break
    return out


def _community_capabilities(
    conn: psycopg.Connection[Any], *, context: list[str], tenant_id: str
) -> list[dict[str, Any]]:
    tools = get_tools(conn, ids=context)
    community = dominant_community([t["community"] for t in tools.values()])
    if community is None:
        return []
    threshold = get_threshold(conn, context=Context.SUGGESTIONS, tenant_id=tenant_id)
    max_usage = max_usage_count(conn, tenant_id=tenant_id)
    caps = community_capabilities(
        conn, tenant_id=tenant_id, community=community, limit=CAPABILITIES_PER_COMMUNITY
    )
    out = []
    for cap in caps:
        score = combined_score(
            success_rate=float(cap["success_rate"]),
            usage_count=int(cap["usage_count"]),
            max_usage=max_usage,
        )
        if score < threshold:
            continue
        out.append(
            {
                "type": "capability",
                "id": str(cap["id"]),
                "name": cap["name"],
                "description": cap["description"],
                "score": round(score, 4),
                "tools_used": list(cap["tools_used"] or []),
                "reason": f"proven in the same tool community as {context[0]} "
                f"(success {float(cap['success_rate']):.0%}, used {int(cap['usage_count'])}*; "
                f"score {score:.2f} ≥ threshold {threshold:.2f})",
            }
        )
    return out


def _graph_tools(conn: psycopg.Connection[Any], *, context: list[str]) -> list[dict[str, Any]]:
    rows = load_neighbourhood(conn, nodes=context)
    if not rows:
        return []
    graph = build_graph(rows)
    undirected = undirected_projection(graph)
    tools = [n for n in graph.nodes if not str(n).startswith(CAPABILITY_PREFIX)]
    out: list[dict[str, Any]] = []
    for source in context[:2]:  # related tools of the first two context tools only: bounded work
        scores = adamic_adar(undirected, context=[source], candidates=tools)
        ranked = sorted(
            ((t, s) for t, s in scores.items() if s > 0 and t not in context),
            key=lambda kv: (-kv[1], kv[0]),
        )
        for tool, value in ranked[:RELATED_PER_TOOL]:
            out.append(
                {
                    "type": "tool",
                    "id": tool,
                    "name": tool,
                    "score": round(min(1.0, value / AA_FULL_CONFIDENCE), 4),
                    "reason": f"related to {source} (shared neighbours, Adamic-Adar {value:.2f})",
                }
            )
    last = context[-1]
    following = [
        (t, w)
        for t, w in out_neighbours(graph, node=last, limit=NEXT_TOOLS + len(context))
        if t not in context and not t.startswith(CAPABILITY_PREFIX)
    ][:NEXT_TOOLS]
    total = sum(w for _, w in out_neighbours(graph, node=last, limit=1000)) or 1.0
    for tool, weight in following:
        out.append(
            {
                "type": "next_tool",
                "id": tool,
                "name": tool,
                # Share of the last tool's outgoing weight: how often this one follows.
                "score": round(weight / total, 4),
                "reason": f"often follows {last}",
            }
        )
    return out
