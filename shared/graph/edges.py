"""Graph edges taught by one execution trace; failed calls teach too (unlike capabilities)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import combinations, pairwise

from shared.executions.trace import TraceSummary
from shared.graph.weights import EdgeKind

CAPABILITY_PREFIX = "cap:"


@dataclass(frozen=True)
class Edge:
    """One edge with how many times this trace showed it (``tool_edges`` adds it up)."""

    src: str
    dst: str
    kind: EdgeKind
    count: int


def capability_node(capability_id: str) -> str:
    """Graph node id of a capability: ``cap:<uuid>`` (tools are ``server:tool``)."""
    text = str(capability_id)
    return text if text.startswith(CAPABILITY_PREFIX) else CAPABILITY_PREFIX + text


def derive_edges(*, summary: TraceSummary, root_capability_id: str | None = None) -> list[Edge]:
    """Every edge the run's trace (read through its summary) teaches, aggregated, sorted by (kind, src, dst).

    - ``sequence``: consecutive tool calls in start order under the same parent
      (top level or one inline capability); one count per adjacent pair; a tool
      following itself is no edge.
    - ``co_used``: each unordered pair of distinct tools of the execution, once per
      execution, stored in canonical order (src < dst): half the rows, and graph
      metrics add both directions when they build the graph.
    - ``contains``: capability → tool for each call made inside a capability.
    - ``calls``: capability → capability for each nested inline capability call.

    ``root_capability_id`` is the capability the whole run executes (a re-run of a
    matched capability, or the one just learned): top-level calls belong to it.
    Failed tool calls count like successful ones: the order was still observed.
    The sorted order also gives upserts one lock order, so concurrent ingests of
    overlapping traces cannot deadlock.
    """
    root = capability_node(root_capability_id) if root_capability_id else None
    counts: Counter[tuple[EdgeKind, str, str]] = Counter()

    calls = summary.tool_calls
    by_parent: dict[str | None, list[str]] = {}
    for call in calls:
        by_parent.setdefault(call.parent, []).append(call.tool)
        owner = capability_node(call.parent) if call.parent else root
        if owner is not None:
            counts[(EdgeKind.CONTAINS, owner, call.tool)] += 1
    for tools in by_parent.values():
        for first, second in pairwise(tools):
            if first != second:
                counts[(EdgeKind.SEQUENCE, first, second)] += 1
    for first, second in combinations(sorted({call.tool for call in calls}), 2):
        counts[(EdgeKind.CO_USED, first, second)] += 1

    for cap_call in summary.capability_calls:
        caller = capability_node(cap_call.parent) if cap_call.parent else root
        callee = capability_node(cap_call.capability_id)
        if caller is not None and caller != callee:
            counts[(EdgeKind.CALLS, caller, callee)] += 1

    return [
        Edge(src=src, dst=dst, kind=kind, count=n) for (kind, src, dst), n in sorted(counts.items())
    ]


def session_edges(*, summary: TraceSummary, after: str | None) -> list[Edge]:
    """The edges a direct call teaches beyond its own trace: ``after`` (the tool its MCP
    session called last, ``extras.direct.after``) precedes this run's first top-level call.

    Direct calls (``/mcp/servers/...``) run one tool each, so their order in a session is
    the only sequence they show; a tool following itself is no edge, as in ``derive_edges``.
    """
    first = next((call.tool for call in summary.tool_calls if call.parent is None), None)
    if after is None or first is None or first == after:
        return []
    return [
        Edge(src=after, dst=first, kind=EdgeKind.SEQUENCE, count=1),
        Edge(src=min(after, first), dst=max(after, first), kind=EdgeKind.CO_USED, count=1),
    ]
