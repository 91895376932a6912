"""Tracing configuration from the standard OTEL_* variables (shared.telemetry)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shared import telemetry


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, True),
    ],
)
def test_tracing_is_on_only_with_an_endpoint(env: dict[str, str], on: bool) -> None:
    assert telemetry.endpoint_configured(env) is on


def _in_child(code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter (the tracer provider is process-global)."""
    clean = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=clean | env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


PROBE = """
import threading
from opentelemetry import trace
from shared import telemetry
on = telemetry.setup("agentcards-test")
with telemetry.span("probe"):
    carrier = telemetry.inject()
print(on, type(trace.get_tracer_provider()).__name__, carrier is not None,
      sorted(t.name for t in threading.enumerate() if t.name != "MainThread"))
"""


def test_without_an_endpoint_nothing_is_installed() -> None:
    # No SDK provider, no exporter thread, nothing to propagate.
    assert _in_child(PROBE) == "False ProxyTracerProvider False []"


def test_an_unsupported_protocol_keeps_tracing_off() -> None:
    out = _in_child(
        PROBE, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_EXPORTER_OTLP_PROTOCOL="grpc"
    )
    assert out.startswith("False ProxyTracerProvider False")


def test_with_an_endpoint_spans_propagate() -> None:
    out = _in_child(PROBE, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert out.startswith("True TracerProvider True")


@pytest.mark.parametrize(
    "carrier",
    [
        None,
        {},
        {"traceparent": "garbage"},
        {"traceparent": "00-" + "0" * 32 + "-" + "1" * 16 + "-01"},
        {"traceparent": 42},
    ],
)
def test_a_malformed_carrier_is_ignored(carrier: dict[str, object] | None) -> None:
    assert telemetry.extract(carrier) is None
    assert telemetry.link_to(carrier) is None


def test_a_valid_carrier_names_its_trace() -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    link = telemetry.link_to({"traceparent": f"00-{trace_id}-{span_id}-01"})
    assert link is not None
    assert format(link.context.trace_id, "032x") == trace_id
    assert format(link.context.span_id, "016x") == span_id
