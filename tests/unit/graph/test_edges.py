"""Edges a trace teaches the tool graph: sequence, co_used, contains, calls."""

from __future__ import annotations

from shared.executions.trace import summarize
from shared.graph.edges import Edge, capability_node, derive_edges, session_edges
from shared.graph.weights import EdgeKind, edge_weight
from tests.unit.graph.trace_builder import TraceBuilder

CAP_A = "aaaaaaaa-0000-0000-0000-000000000001"
CAP_B = "bbbbbbbb-0000-0000-0000-000000000002"


def edges_of(kind: EdgeKind, edges: list[Edge]) -> dict[tuple[str, str], int]:
    return {(e.src, e.dst): e.count for e in edges if e.kind is kind}


def test_sequence_follows_start_order_and_counts_repeats() -> None:
    trace = (
        TraceBuilder().tool("fs:read").tool("text:split").tool("fs:read").tool("text:split").events
    )
    edges = derive_edges(summary=summarize(trace))
    assert edges_of(EdgeKind.SEQUENCE, edges) == {
        ("fs:read", "text:split"): 2,
        ("text:split", "fs:read"): 1,
    }


def test_concurrent_calls_are_ordered_by_start_not_end() -> None:
    builder = TraceBuilder()
    first = builder.start_tool("slow:a")
    second = builder.start_tool("fast:b")
    builder.end_tool(second, "fast:b").end_tool(first, "slow:a")
    assert edges_of(EdgeKind.SEQUENCE, derive_edges(summary=summarize(builder.events))) == {
        ("slow:a", "fast:b"): 1
    }


def test_repeated_tool_is_no_self_loop() -> None:
    trace = TraceBuilder().tool("fs:read").tool("fs:read").events
    edges = derive_edges(summary=summarize(trace))
    assert edges == []


def test_co_used_pairs_are_canonical_and_once_per_execution() -> None:
    trace = TraceBuilder().tool("z:last").tool("a:first").tool("z:last").tool("m:mid").events
    assert edges_of(EdgeKind.CO_USED, derive_edges(summary=summarize(trace))) == {
        ("a:first", "m:mid"): 1,
        ("a:first", "z:last"): 1,
        ("m:mid", "z:last"): 1,
    }


def test_failed_calls_still_teach_tool_edges() -> None:
    trace = TraceBuilder().tool("fs:read").tool("gmail:send", ok=False).events
    edges = derive_edges(summary=summarize(trace))
    assert edges_of(EdgeKind.SEQUENCE, edges) == {("fs:read", "gmail:send"): 1}
    assert edges_of(EdgeKind.CO_USED, edges) == {("fs:read", "gmail:send"): 1}


def test_nested_capability_gives_contains_and_calls_and_separate_sequences() -> None:
    builder = TraceBuilder().tool("fs:read")
    inner = builder.capability(CAP_B)
    builder.tool("memory:search", parent=inner).tool("memory:store", parent=inner)
    builder.tool("slack:post")
    edges = derive_edges(summary=summarize(builder.events), root_capability_id=CAP_A)

    # Sequences stay within their parent: the top level goes read → post.
    assert edges_of(EdgeKind.SEQUENCE, edges) == {
        ("fs:read", "slack:post"): 1,
        ("memory:search", "memory:store"): 1,
    }
    assert edges_of(EdgeKind.CONTAINS, edges) == {
        (f"cap:{CAP_A}", "fs:read"): 1,
        (f"cap:{CAP_A}", "slack:post"): 1,
        (f"cap:{CAP_B}", "memory:search"): 1,
        (f"cap:{CAP_B}", "memory:store"): 1,
    }
    assert edges_of(EdgeKind.CALLS, edges) == {(f"cap:{CAP_A}", f"cap:{CAP_B}"): 1}
    # co_used spans the whole execution, nested calls included (4 tools → 6 pairs).
    assert len(edges_of(EdgeKind.CO_USED, edges)) == 6


def test_without_a_root_capability_top_level_calls_have_no_owner() -> None:
    builder = TraceBuilder().tool("fs:read")
    inner = builder.capability(CAP_B)
    builder.tool("memory:store", parent=inner)
    edges = derive_edges(summary=summarize(builder.events))
    assert edges_of(EdgeKind.CONTAINS, edges) == {(f"cap:{CAP_B}", "memory:store"): 1}
    assert edges_of(EdgeKind.CALLS, edges) == {}


def test_capability_calling_capability_nested_two_deep() -> None:
    builder = TraceBuilder()
    outer = builder.capability(CAP_A)
    builder.capability(CAP_B, parent=outer)
    assert edges_of(EdgeKind.CALLS, derive_edges(summary=summarize(builder.events))) == {
        (f"cap:{CAP_A}", f"cap:{CAP_B}"): 1
    }


def test_output_is_sorted_so_upserts_lock_in_one_order() -> None:
    trace = TraceBuilder().tool("b:x").tool("a:y").tool("c:z").events
    edges = derive_edges(summary=summarize(trace), root_capability_id=CAP_A)
    keys = [(e.kind, e.src, e.dst) for e in edges]
    assert keys == sorted(keys)


def test_progress_and_unknown_events_teach_nothing() -> None:
    trace = [*TraceBuilder().progress("x").events, {"type": "log", "message": "hi"}]
    assert derive_edges(summary=summarize(trace)) == []


def test_capability_node_ids() -> None:
    assert capability_node(CAP_A) == f"cap:{CAP_A}"
    assert capability_node(f"cap:{CAP_A}") == f"cap:{CAP_A}"


def test_edge_weight_grows_with_count_but_sublinearly() -> None:
    once = edge_weight(kind=EdgeKind.SEQUENCE, count=1)
    assert once == 1.0
    assert edge_weight(kind="co_used", count=1) == 0.5
    assert once < edge_weight(kind=EdgeKind.SEQUENCE, count=100) < 100 * once
    assert edge_weight(kind=EdgeKind.CONTAINS, count=0) == 0.0


def test_only_the_type_key_names_an_event() -> None:
    # Only "type" names an event: a trace whose events are keyed "event" gives no edges.
    trace = TraceBuilder().tool("fs:read").tool("fs:write", ok=False).events
    renamed = [{("event" if k == "type" else k): v for k, v in e.items()} for e in trace]
    assert derive_edges(summary=summarize(trace)) != []
    assert derive_edges(summary=summarize(renamed)) == []


def test_a_direct_call_follows_the_last_tool_of_its_mcp_session() -> None:
    summary = summarize(TraceBuilder().tool("example:multiply").events)
    edges = session_edges(summary=summary, after="example:divide")
    assert edges_of(EdgeKind.SEQUENCE, edges) == {("example:divide", "example:multiply"): 1}
    assert edges_of(EdgeKind.CO_USED, edges) == {("example:divide", "example:multiply"): 1}
    assert session_edges(summary=summary, after=None) == []  # the session's first call
    assert session_edges(summary=summary, after="example:multiply") == []  # no self-loop
    assert session_edges(summary=summarize([]), after="example:divide") == []  # refused call
