"""OpenTelemetry traces of a real stack, exported over OTLP/HTTP to a real receiver in the test.

One REST execution with two tool calls is one trace across the gateway, the sandbox worker,
the toolhost and the downstream MCP server (which got ``traceparent`` in ``params._meta``);
the learning worker's ingestion links to it. A caller's ``traceparent`` (header or MCP
``_meta``) is honoured, a malformed one ignored; a dead collector changes nothing for the
caller; no argument or result value ever reaches an exported span.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.bench.otlp_receiver import OtlpReceiver, ReceivedSpan, start_receiver
from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis
from tests.integration.mcp_servers import REPO
from tests.stack import E2EStack, mcp_session, running_stack, wait_until

pytestmark = pytest.mark.integration

CANARY = f"sk-canary-{secrets.token_hex(8)}"
PII = "jane.doe.4471@example.org"
TWO_LOOKUPS = """
first = await mcp.traced.lookup(key=args["secret"])
second = await mcp.traced.lookup(key=args["email"])
return [first["echo"], second["echo"]]
"""
ONE_LOOKUP = 'return (await mcp.traced.lookup(key="k"))["echo"]'
TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


def traced_server(tmp: Path, endpoint: str) -> dict[str, Any]:
    """tests/integration/traced_server.py over stdio, tracing to ``endpoint``."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.integration.traced_server"],
        "cwd": str(REPO),
        "env": {
            "TRACED_SERVER_LOG": str(tmp / "traced-meta.jsonl"),
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
    }


def otel_env(endpoint: str) -> dict[str, str]:
    """The standard variables an operator sets; a short batch delay so spans arrive soon."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    running = start_receiver()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def traced(
    embedded_pg: EmbeddedPostgres,
    redis_server: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
    receiver: OtlpReceiver,
) -> Iterator[E2EStack]:
    tmp = tmp_path_factory.mktemp("traced")
    servers = {"traced": traced_server(tmp, receiver.endpoint)}
    # Its own stack: every process exports spans to this module's OTLP receiver.
    with running_stack(
        embedded_pg, redis_server, tmp, servers, env=otel_env(receiver.endpoint)
    ) as stack:
        yield stack


def execute(stack: E2EStack, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(
            "/v1/executions", params={"wait": "true"}, json=body, headers=headers
        )
    assert response.status_code == 200, response.text
    view = dict(response.json())
    assert view["status"] == "succeeded", view
    return view


def one(spans: list[ReceivedSpan], **match: Any) -> ReceivedSpan:
    found = [s for s in spans if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, [(s.service, s.name) for s in spans])
    return found[0]


def render(spans: list[ReceivedSpan]) -> str:
    """The trace as an indented tree: service, span name, kind, duration."""
    children: dict[str, list[ReceivedSpan]] = {}
    ids = {s.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_ns):
        children.setdefault(span.parent_id if span.parent_id in ids else "", []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in children.get(parent, []):
            lines.append(
                f"{'  ' * depth}{span.service:28} {span.name} [{span.kind}] "
                f"{span.duration_ms:.1f} ms"
            )
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)


def test_one_execution_is_one_trace_across_the_services(
    traced: E2EStack, receiver: OtlpReceiver
) -> None:
    view = execute(
        traced, {"code": TWO_LOOKUPS, "args": {"secret": CANARY, "email": PII}, "intent": "x"}
    )
    # The e-mail comes back as a privacy token (the privacy layer is on by default).
    assert view["result"][0] == f"looked up {CANARY}"
    assert view["result"][1].startswith("looked up ⟨EMAIL_"), view["result"]
    trace_id = view["trace_id"]
    assert TRACE_ID.match(trace_id), view

    def complete() -> bool:
        spans = receiver.trace(trace_id)
        names = [s.name for s in spans]
        return (
            names.count("tools/call lookup") >= 6
            and "pipeline.learn" in names
            and any(
                s.service == "agentcards-gateway" and s.kind == "server" and s.parent_id == ""
                for s in spans
            )
        )

    wait_until(complete, what="the execution's spans", timeout_s=60)
    spans = receiver.trace(trace_id)
    print("\n" + render(spans))
    assert {s.service for s in spans} >= {
        "agentcards-gateway",
        "agentcards-sandbox-worker",
        "agentcards-toolhost",
        "traced-test-server",
    }
    by_id = {s.span_id: s for s in spans}

    # Gateway: the HTTP server span is the root; admission inside it; the Celery publish.
    root = one(spans, service="agentcards-gateway", kind="server", parent_id="")
    assert root.attributes.get("http.request.method", root.attributes.get("http.method")) == "POST"
    admission = one(spans, name="admission")
    assert by_id[admission.parent_id].service == "agentcards-gateway"
    publish = one(spans, service="agentcards-gateway", kind="producer")
    assert publish.name.endswith("agentcards.run_execution") or "run_execution" in publish.name
    # The Celery hop: the worker's consume span is the publish span's child.
    consume = one(spans, service="agentcards-sandbox-worker", kind="consumer")
    assert consume.parent_id == publish.span_id
    run = one(spans, name="execution.run")
    assert run.parent_id == consume.span_id
    assert run.attributes["agentcards.execution.status"] == "succeeded"
    stages = {s.name: s for s in spans if s.name.startswith("pipeline.")}
    assert {"pipeline.scope", "pipeline.sandbox", "pipeline.store", "pipeline.learn"} <= set(stages)
    assert all(s.parent_id == run.span_id for s in stages.values())

    # One CLIENT span per tool call, each a child of the run's sandbox span.
    calls = [s for s in spans if s.service == "agentcards-sandbox-worker" and s.kind == "client"]
    assert len(calls) == 2
    for call in calls:
        assert call.parent_id == stages["pipeline.sandbox"].span_id
        assert call.name == "tools/call lookup"
        assert call.attributes["gen_ai.operation.name"] == "execute_tool"
        assert call.attributes["mcp.method.name"] == "tools/call"
        assert call.attributes["gen_ai.tool.name"] == "lookup"
        assert call.attributes["agentcards.mcp.server"] == "traced"
        assert call.attributes["agentcards.tool.outcome"] == "ok"
        assert call.attributes["agentcards.tool.args.size"] > 0
        assert "error.type" not in call.attributes
    # The toolhost's SERVER span of each call is its child; the downstream server's span
    # continues below the MCP SDK's client span.
    handled = [s for s in spans if s.service == "agentcards-toolhost" and s.kind == "server"]
    assert sorted(s.parent_id for s in handled) == sorted(c.span_id for c in calls)
    downstream = [s for s in spans if s.service == "traced-test-server"]
    assert len(downstream) == 2
    for span in downstream:
        sender = by_id[span.parent_id]
        assert sender.service == "agentcards-toolhost" and sender.kind == "client"
        assert by_id[sender.parent_id] in handled

    # What the downstream server received in params._meta: this trace, sent by the toolhost.
    meta_log = traced.tmp / "traced-meta.jsonl"
    seen = [json.loads(line) for line in meta_log.read_text().splitlines()]
    parents = {s.span_id for s in spans if s.service == "agentcards-toolhost"}
    mine = [m for m in seen if m["traceparent"] and m["traceparent"].split("-")[1] == trace_id]
    assert len(mine) == 2, seen
    assert all(m["traceparent"].split("-")[2] in parents for m in mine)

    # The learning worker's ingestion is its own trace, linked to this one.
    def linked() -> list[ReceivedSpan]:
        return [
            s
            for s in receiver.all_spans()
            if s.name == "learning.ingest" and any(t == trace_id for t, _ in s.links)
        ]

    wait_until(lambda: linked(), what="the ingest span linked to the execution", timeout_s=60)
    ingest = linked()[0]
    assert ingest.service == "agentcards-learning-worker"
    assert ingest.trace_id != trace_id

    # The JSON view by id carries the same trace id.
    with traced.client() as client:
        assert client.get(f"/v1/executions/{view['id']}").json()["trace_id"] == trace_id


def test_no_argument_or_result_value_reaches_a_span(
    traced: E2EStack, receiver: OtlpReceiver
) -> None:
    view = execute(traced, {"code": TWO_LOOKUPS, "args": {"secret": CANARY, "email": PII}})
    wait_until(
        lambda: sum(s.name == "tools/call lookup" for s in receiver.trace(view["trace_id"])) >= 6,
        what="the tool-call spans",
        timeout_s=60,
    )
    exported = b"".join(receiver.bodies)
    assert exported  # the check below would be empty otherwise
    for value in (CANARY, PII, "mcp.traced.lookup", 'args["secret"]'):
        assert value.encode() not in exported, value


def test_a_callers_traceparent_is_honoured(traced: E2EStack, receiver: OtlpReceiver) -> None:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    view = execute(traced, {"code": ONE_LOOKUP}, traceparent=f"00-{trace_id}-{parent}-01")
    assert view["trace_id"] == trace_id

    # The gateway's HTTP span ends after its answer is sent, so it can be exported after the
    # run's: wait for both.
    def arrived() -> bool:
        spans = receiver.trace(trace_id)
        return any(s.name == "execution.run" for s in spans) and any(
            s.service == "agentcards-gateway" and s.kind == "server" for s in spans
        )

    wait_until(
        arrived, what="the run's and the gateway's spans in the caller's trace", timeout_s=60
    )
    root = one(receiver.trace(trace_id), service="agentcards-gateway", kind="server")
    assert root.parent_id == parent


@pytest.mark.parametrize(
    "header",
    ["00-not-a-trace-01", "00-" + "0" * 32 + "-" + "1" * 16 + "-01", "garbage"],
)
def test_a_malformed_traceparent_is_ignored(traced: E2EStack, header: str) -> None:
    view = execute(traced, {"code": ONE_LOOKUP}, traceparent=header)
    assert TRACE_ID.match(view["trace_id"]) and view["trace_id"] != "0" * 32


async def test_mcp_meta_traceparent_is_honoured(traced: E2EStack, receiver: OtlpReceiver) -> None:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    async with mcp_session(traced) as session:
        result = await session.call_tool(
            "execute_code",
            {"code": ONE_LOOKUP},
            meta={"traceparent": f"00-{trace_id}-{parent}-01"},
        )
    assert not result.is_error, result
    assert result.structured_content is not None
    assert result.structured_content["trace_id"] == trace_id
    wait_until(
        lambda: any(s.name == "tools/call lookup" for s in receiver.trace(trace_id)),
        what="the tool call in the caller's trace",
        timeout_s=60,
    )


def test_executions_run_when_the_collector_is_down(
    traced: E2EStack, receiver: OtlpReceiver
) -> None:
    with receiver.down():  # connections to the endpoint are refused meanwhile
        views = [execute(traced, {"code": TWO_LOOKUPS, "args": {"secret": "a", "email": "b"}})
                 for _ in range(3)]  # fmt: skip
    assert [v["result"] for v in views] == [["looked up a", "looked up b"]] * 3
    assert all(TRACE_ID.match(v["trace_id"]) for v in views)
    assert all(proc.proc.poll() is None for proc in traced.procs.values())
    # Back up: the next execution's trace arrives whole (the exporters recovered).
    view = execute(traced, {"code": ONE_LOOKUP})
    wait_until(
        lambda: any(s.name == "execution.run" for s in receiver.trace(view["trace_id"])),
        what="spans once the collector is back",
        timeout_s=60,
    )
