"""Spans of a claimed run: one around the whole pipeline, one per stage (a runner wrapper).

The sandbox stage's span is the parent of the run's tool-call spans (``shared.sandbox.bridge``).
Attributes name the execution and its stages; never its code, arguments or result.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace

from shared import telemetry
from shared.executions.trace import EventType
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.pipeline.runner import Stage, Wrapper

EXECUTION_ID = "agentcards.execution.id"


@contextmanager
def stage_span(stage: Stage, ctx: RunContext) -> Iterator[None]:
    """The span of one stage, named ``pipeline.<stage>``; the sandbox stage's holds the run's
    inline capability calls as nested spans once the run is over."""
    with telemetry.span(
        f"pipeline.{stage.name}",
        attributes={EXECUTION_ID: ctx.execution_id, "agentcards.stage": stage.name},
    ):
        yield
        if stage.name == "sandbox" and ctx.outcome is not None:
            capability_spans(ctx.outcome.trace)


def capability_spans(
    events: Sequence[dict[str, Any]], *, tracer: trace.Tracer | None = None
) -> None:
    """One span per recorded capability call (``capability <name>``), timed by the child's own
    measurements and nested by its parent capability, under the current span. Made after the
    run from its trace: the child reports capability calls in batches, after the fact."""
    ends = [e for e in events if e.get("type") == EventType.CAPABILITY_END]
    calls = sorted(
        (float(e["ts"]) - float(e.get("duration_ms") or 0) / 1000, float(e["ts"]), e)
        for e in ends
        if isinstance(e.get("ts"), int | float)
    )
    opened: list[tuple[float, float, str, trace.Span]] = []  # start, end, capability id, span
    tracer = tracer or telemetry.tracer()
    for start, end, event in calls:
        # The innermost capability call of the parent's id still open at this start.
        parent = next(
            (
                span
                for s, e, capability, span in reversed(opened)
                if capability == event.get("parent") and s <= start <= e
            ),
            None,
        )
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = tracer.start_span(
            f"capability {event.get('name')}",
            context=context,
            start_time=int(start * 1e9),
            attributes={
                "agentcards.capability.id": str(event.get("capability_id")),
                "agentcards.capability.call_id": str(event.get("call_id")),
            },
        )
        if not event.get("ok", True):
            error = event.get("error") or {}
            telemetry.fail(span, str(error.get("type") or "error"))
        span.end(end_time=int(end * 1e9))
        opened.append((start, end, str(event.get("capability_id")), span))


def wrappers() -> tuple[Wrapper, ...]:
    """The runner's wrappers: a span per stage when tracing, none otherwise (no cost)."""
    return (stage_span,) if telemetry.enabled() else ()


@contextmanager
def run_span(ctx: RunContext) -> Iterator[None]:
    """The run's span (``execution.run``), with how it ended."""
    with telemetry.span(
        "execution.run",
        attributes={EXECUTION_ID: ctx.execution_id, "code.size": len(ctx.row.get("code") or "")},
    ) as span:
        yield
        span.set_attribute("agentcards.execution.status", str(ctx.status))
        if ctx.outcome is not None:
            span.set_attribute("agentcards.tool_calls", ctx.outcome.tool_calls)
            if ctx.outcome.error:
                telemetry.fail(span, str(ctx.outcome.error.get("type", "error")))
