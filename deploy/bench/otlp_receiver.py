"""A real OTLP/HTTP receiver (`bench tracing`, the tracing tests): POST /v1/traces, decoded with opentelemetry-proto."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

SPAN_KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, decoded: ids in hex, attributes as Python values."""

    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    links: list[tuple[str, str]]  # (trace_id, span_id)
    status_code: int

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


@dataclass
class OtlpReceiver:
    """Collects every span exported to it, and every raw request body (for leak checks)."""

    server: ThreadingHTTPServer = field(init=False)
    spans: list[ReceivedSpan] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def all_spans(self) -> list[ReceivedSpan]:
        with self.lock:
            return list(self.spans)

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        decoded = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    decoded.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name")),
                            name=span.name,
                            kind=SPAN_KINDS.get(span.kind, "unspecified"),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=[(x.trace_id.hex(), x.span_id.hex()) for x in span.links],
                            status_code=span.status.code,
                        )
                    )
        with self.lock:
            self.bodies.append(body)
            self.spans.extend(decoded)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @contextmanager
    def down(self) -> Iterator[None]:
        """Nothing listens on the endpoint inside the block (connections refused); then the
        receiver serves again on the same port."""
        port = int(self.server.server_address[1])
        self.stop()
        try:
            yield
        finally:
            self.server = _serve(self, "127.0.0.1", port)


def start_receiver() -> OtlpReceiver:
    """A receiver on a free loopback port, served by a background thread."""
    receiver = OtlpReceiver()
    receiver.server = _serve(receiver, "127.0.0.1", 0)
    return receiver


def _serve(receiver: OtlpReceiver, host: str, port: int) -> ThreadingHTTPServer:
    """Serve ``receiver`` on ``host:port`` from a background thread."""
    holder = {"receiver": receiver}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            holder["receiver"].add(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
