"""OpenTelemetry tracing, configured by the standard ``OTEL_*`` environment variables only.

Each process calls :func:`setup` once with its own ``service.name`` (``agentcards-gateway``,
``-toolhost``, ``-sandbox-worker``, ``-learning-worker``, ``-beat``). Tracing is on when an
OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and ``OTEL_SDK_DISABLED`` is not true; otherwise
nothing is installed at all: no SDK provider, no exporter thread, and every span below is
the API's non-recording no-op. The sampler (``OTEL_TRACES_SAMPLER``/``_ARG``), resource
attributes (``OTEL_RESOURCE_ATTRIBUTES``), headers and timeouts are the SDK's own reading of
the same variables. Spans leave through a ``BatchSpanProcessor``: a bounded queue that drops
when full, exported by a background thread, so a dead collector never grows a backlog nor
adds latency to the work.

Span attributes hold names, ids, sizes and hashes: never argument values, results or code.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

log = logging.getLogger(__name__)

TRACER_NAME = "agentcards"
# The exporter's queue: spans beyond it are dropped (counted by the SDK), never buffered.
MAX_QUEUE_SIZE = 2048
SUPPORTED_PROTOCOL = "http/protobuf"
_enabled = False
P = ParamSpec("P")
R = TypeVar("R")


def endpoint_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    )


def setup(service_name: str) -> bool:
    """Install the tracer provider and exporter for this process; returns whether tracing is on.

    Idempotent. Off (nothing installed) when no endpoint is configured; a protocol other
    than ``http/protobuf`` is refused with one warning and tracing stays off.
    """
    global _enabled
    if _enabled or not endpoint_configured():
        return _enabled
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or SUPPORTED_PROTOCOL
    ).strip()
    if protocol != SUPPORTED_PROTOCOL:
        log.warning(
            "OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported (only %s); tracing stays off",
            protocol,
            SUPPORTED_PROTOCOL,
        )
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Our service.name wins over one in OTEL_RESOURCE_ATTRIBUTES: each process names itself.
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    # Forked pool processes (Celery prefork) restart the export thread by the SDK's at-fork hook.
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(), max_queue_size=MAX_QUEUE_SIZE)
    )
    trace.set_tracer_provider(provider)
    _enabled = True
    log.info("tracing on: %s exports spans over OTLP (%s)", service_name, protocol)
    return True


def enabled() -> bool:
    """Whether this process exports spans."""
    return _enabled


def shutdown() -> None:
    """Flush and stop the exporter (at process exit; bounded by the exporter's timeout)."""
    provider = trace.get_tracer_provider()
    stop = getattr(provider, "shutdown", None)
    if _enabled and callable(stop):
        stop()


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def span(
    name: str,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, Any] | None = None,
    parent: otel_context.Context | None = None,
    links: list[Link] | None = None,
) -> AbstractContextManager[Span]:
    """A current span around the block; an exception marks it failed with ``error.type``.
    Not tracing: one shared no-op context (no generator, no API bookkeeping)."""
    if not _enabled:
        return _NO_SPAN
    return _recording(name, kind=kind, attributes=attributes, parent=parent, links=links)


_NO_SPAN: AbstractContextManager[Span] = nullcontext(trace.INVALID_SPAN)


@contextmanager
def _recording(
    name: str,
    *,
    kind: SpanKind,
    attributes: Mapping[str, Any] | None,
    parent: otel_context.Context | None,
    links: list[Link] | None,
) -> Iterator[Span]:
    with tracer().start_as_current_span(
        name,
        kind=kind,
        attributes=dict(attributes or {}),
        context=parent,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            fail(current, type(exc).__qualname__)
            raise


def traced(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A function run inside an internal span ``name`` (a decorator, at the work's boundary)."""

    def wrap(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            if not _enabled:
                return func(*args, **kwargs)
            with span(name):
                return func(*args, **kwargs)

        return inner

    return wrap


def instrument_celery() -> None:
    """Celery publish and consume spans (the maintained instrumentation): the W3C context
    travels in each message's headers, so a task continues the trace that sent it."""
    if _enabled:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor

        CeleryInstrumentor().instrument()


def fail(current: Span, error_type: str, message: str | None = None) -> None:
    """Mark a span failed with ``error.type`` (a type name, never a value)."""
    current.set_attribute("error.type", error_type)
    current.set_status(Status(StatusCode.ERROR, message))


def tag_current(**attributes: str | None) -> None:
    """Set attributes (the caller: ``enduser.id``, ``agentcards.tenant_id``) on the current span."""
    if not _enabled:
        return
    current = trace.get_current_span()
    for name, value in attributes.items():
        if value is not None:
            current.set_attribute(name, value)


def inject() -> dict[str, str] | None:
    """The current W3C trace context as a carrier (``traceparent``, maybe ``tracestate``);
    None when there is no sampled-or-not valid span to continue."""
    if not _enabled:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def extract(carrier: Mapping[str, Any] | None) -> otel_context.Context | None:
    """The context a carrier names, or None when it is absent or malformed (then ignored)."""
    if not carrier:
        return None
    try:
        ctx = propagate.extract({k: v for k, v in carrier.items() if isinstance(v, str)})
    except (TypeError, ValueError):
        return None
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def link_to(carrier: Mapping[str, Any] | None) -> Link | None:
    """A link to the span a carrier names (None when absent or malformed)."""
    ctx = extract(carrier)
    if ctx is None:
        return None
    return Link(trace.get_current_span(ctx).get_span_context())


def current_ids() -> tuple[str, str] | None:
    """The current span's (trace_id, span_id) in hex, or None outside a valid span."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


def current_trace_id() -> str | None:
    """The current trace id in hex (None when not tracing)."""
    ids = current_ids() if _enabled else None
    return ids[0] if ids else None
