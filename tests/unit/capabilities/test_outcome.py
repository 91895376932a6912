"""A capability is saved only if the run succeeded with an intent and every tool call succeeded."""

from __future__ import annotations

from shared.capabilities.outcome import Verdict, decide_learning
from shared.executions.trace import summarize
from tests.unit.graph.trace_builder import TraceBuilder


def test_all_tools_succeeded_learns_with_every_tool_in_call_order() -> None:
    trace = (
        TraceBuilder()
        .tool("memory:search_nodes")
        .tool("memory:create_entities")
        .tool("memory:search_nodes")
    )
    decision = decide_learning(
        status="succeeded", intent="memory workflow", summary=summarize(trace.events)
    )
    assert decision.learn
    assert decision.verdict is Verdict.LEARN
    assert decision.tools_used == ["memory:search_nodes", "memory:create_entities"]
    assert decision.failed_tools == []
    assert decision.tool_failures == []


def test_one_failed_tool_skips_the_capability_and_names_the_failures() -> None:
    # Two servers not connected: the code caught the errors, so the run itself "succeeded".
    trace = (
        TraceBuilder()
        .tool("gmail:get_profile", ok=False, error="MCP server not connected")
        .tool("google_maps:text_search", ok=False, error="MCP server not connected")
        .tool("memory:search_nodes")
        .tool("notion:notion-get-user", ok=False, error="server undefined")
    )
    decision = decide_learning(
        status="succeeded", intent="Call Gmail, Maps...", summary=summarize(trace.events)
    )
    assert not decision.learn
    assert decision.verdict is Verdict.TOOL_FAILURES
    assert decision.failed_tools == [
        "gmail:get_profile",
        "google_maps:text_search",
        "notion:notion-get-user",
    ]
    # Still the full list: the graph learns from failed calls too.
    assert decision.tools_used[2] == "memory:search_nodes" and len(decision.tools_used) == 4
    assert decision.tool_failures[0] == {
        "tool": "gmail:get_profile",
        "error": "MCP server not connected",
        "type": "tool_error",
    }


def test_a_call_that_never_ended_counts_as_failed() -> None:
    builder = TraceBuilder().tool("fs:read")
    builder.start_tool("fs:write")  # the deadline cut it off
    decision = decide_learning(status="succeeded", intent="copy", summary=summarize(builder.events))
    assert decision.verdict is Verdict.TOOL_FAILURES
    assert decision.failed_tools == ["fs:write"]
    assert decision.tool_failures[0]["type"] == "lost"


def test_failed_call_inside_an_inline_capability_counts() -> None:
    builder = TraceBuilder().tool("fs:read")
    cap = builder.capability("11111111-1111-1111-1111-111111111111")
    builder.tool("memory:store", ok=False, parent=cap)
    decision = decide_learning(status="succeeded", intent="x", summary=summarize(builder.events))
    assert decision.failed_tools == ["memory:store"]


def test_code_without_tools_is_learned() -> None:
    decision = decide_learning(status="succeeded", intent="add numbers", summary=summarize([]))
    assert decision.learn and decision.tools_used == []


def test_failed_run_or_missing_intent_is_not_learned() -> None:
    trace = TraceBuilder().tool("fs:read").events
    assert (
        decide_learning(status="failed", intent="x", summary=summarize(trace)).verdict
        is Verdict.EXECUTION_FAILED
    )
    assert (
        decide_learning(status="timeout", intent="x", summary=summarize(trace)).verdict
        is Verdict.EXECUTION_FAILED
    )
    assert (
        decide_learning(status="succeeded", intent=None, summary=summarize(trace)).verdict
        is Verdict.NO_INTENT
    )
    assert (
        decide_learning(status="succeeded", intent="  ", summary=summarize(trace)).verdict
        is Verdict.NO_INTENT
    )


def test_failed_run_still_reports_its_tool_failures() -> None:
    trace = TraceBuilder().tool("fs:read", ok=False).events
    decision = decide_learning(status="failed", intent="x", summary=summarize(trace))
    assert decision.verdict is Verdict.EXECUTION_FAILED
    assert decision.failed_tools == ["fs:read"]


def test_progress_events_are_ignored() -> None:
    trace = TraceBuilder().progress("half").tool("fs:read").progress("done").events
    assert decide_learning(status="succeeded", intent="x", summary=summarize(trace)).learn


def test_events_keyed_event_are_no_longer_read() -> None:
    # Only "type" names an event: a trace whose events are keyed "event" teaches nothing.
    trace = TraceBuilder().tool("fs:read").tool("fs:write", ok=False).events
    renamed = [{("event" if k == "type" else k): v for k, v in e.items()} for e in trace]
    assert decide_learning(status="succeeded", intent="copy", summary=summarize(trace)).failed_tools
    decision = decide_learning(status="succeeded", intent="copy", summary=summarize(renamed))
    assert decision.tools_used == [] and decision.failed_tools == []


def test_an_empty_result_or_a_run_not_wanted_is_not_learned() -> None:
    summary = summarize(TraceBuilder().tool("memory:search_nodes").events)
    empty = decide_learning(status="succeeded", intent="x", summary=summary, result_empty=True)
    assert not empty.learn and empty.verdict is Verdict.EMPTY_RESULT
    unwanted = decide_learning(status="succeeded", intent="x", summary=summary, wanted=False)
    assert not unwanted.learn and unwanted.verdict is Verdict.NOT_WANTED
    # A failed tool is named first: the log and metrics still say why.
    failed = summarize(TraceBuilder().tool("memory:search_nodes", ok=False, error="e").events)
    both = decide_learning(status="succeeded", intent="x", summary=failed, result_empty=True)
    assert both.verdict is Verdict.TOOL_FAILURES
