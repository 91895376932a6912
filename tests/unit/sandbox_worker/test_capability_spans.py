"""Nested inline capability calls become nested spans, timed by the run's trace."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared.executions.trace import CallEnd, CapabilityStart
from workers.sandbox.pipeline.tracing import capability_spans


def _end(call_id: str, cap: str, parent: str | None, start: float, ms: float, ok: bool = True):
    start_event = CapabilityStart(
        call_id=call_id, capability_id=cap, name=f"name_{cap}", parent=parent, ts=start
    )
    error = None if ok else {"type": "runtime_error", "message": "secret detail"}
    return CallEnd(start_event, ts=start + ms / 1000, duration_ms=ms, error=error).as_dict()


def test_capability_calls_nest_by_parent_and_time() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    t0 = 1_700_000_000.0
    events = [
        # a calls b twice; the second b calls c, which fails. Ends come innermost first.
        _end("cap-call-2", "b", "a", t0 + 0.010, 5),
        _end("cap-call-4", "c", "b", t0 + 0.030, 2, ok=False),
        _end("cap-call-3", "b", "a", t0 + 0.020, 20),
        _end("cap-call-1", "a", None, t0, 100),
        {"type": "tool_end", "call_id": "call-1", "ts": t0 + 0.05},
    ]
    capability_spans(events, tracer=provider.get_tracer("test"))
    spans = {
        s.attributes["agentcards.capability.call_id"]: s for s in exporter.get_finished_spans()
    }
    assert set(spans) == {"cap-call-1", "cap-call-2", "cap-call-3", "cap-call-4"}
    a, b1, b2, c = (spans[f"cap-call-{i}"] for i in (1, 2, 3, 4))
    assert a.parent is None and a.name == "capability name_a"
    assert b1.parent.span_id == a.context.span_id and b2.parent.span_id == a.context.span_id
    assert c.parent.span_id == b2.context.span_id  # the b that was open when c started
    assert len({s.context.trace_id for s in spans.values()}) == 1
    assert (a.end_time - a.start_time) == 100_000_000
    assert c.attributes["error.type"] == "runtime_error"
    assert "secret detail" not in str(c.status.description) + str(dict(c.attributes))
