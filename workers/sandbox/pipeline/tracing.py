"""Spans of a claimed run: one around the whole pipeline, one per stage (a runner wrapper).

The sandbox stage's span is the parent of the run's tool-call spans (``shared.sandbox.bridge``).
Attributes name the execution and its stages; never its code, arguments or result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from shared import telemetry
from workers.sandbox.pipeline.context import RunContext
from workers.sandbox.pipeline.runner import Stage, Wrapper

EXECUTION_ID = "agentcards.execution.id"


def stage_span(stage: Stage, ctx: RunContext) -> AbstractContextManager[object]:
    """The span of one stage, named ``pipeline.<stage>``."""
    return telemetry.span(
        f"pipeline.{stage.name}",
        attributes={EXECUTION_ID: ctx.execution_id, "agentcards.stage": stage.name},
    )


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
