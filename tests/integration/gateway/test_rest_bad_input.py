"""Bad input to the REST API: a clear 4xx with a structured error, and nothing recorded or queued."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from shared.config import Settings
from shared.db import connect
from shared.inputs import (
    BODY_DEPTH,
    REQUEST_TARGET_BYTES,
    SQL_INT_MAX,
    VALUE_DEPTH,
    body_bytes_cap,
)
from shared.sandbox.child import wire
from tests.harness import Proc
from tests.integration.gateway.conftest import start_sandbox_worker
from tests.integration.mcp_servers import ToolhostProcess, example_server, write_config


def _executions(settings: Settings) -> int:
    with connect(settings.database_url or "") as conn:
        row = conn.execute("SELECT count(*) AS n FROM executions").fetchone()
    assert row is not None
    return int(row["n"])


def _queued_messages(settings: Settings) -> int:
    return int(redis.Redis.from_url(settings.redis_url or "").llen("executions"))


def _assert_nothing_recorded(settings: Settings) -> None:
    assert _executions(settings) == 0
    assert _queued_messages(settings) == 0


def test_invalid_json_is_a_400_naming_the_problem(client: TestClient, settings: Settings) -> None:
    response = client.post(
        "/v1/executions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_json"
    _assert_nothing_recorded(settings)


def test_wrong_types_name_the_field(client: TestClient, settings: Settings) -> None:
    response = client.post("/v1/executions", json={"code": 42, "args": "not an object"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "validation_error"
    fields = {d["field"] for d in error["details"]}
    assert {"code", "args"} <= fields
    _assert_nothing_recorded(settings)


def test_unknown_fields_are_refused(client: TestClient, settings: Settings) -> None:
    response = client.post("/v1/executions", json={"code": "return 1", "codez": "x"})
    assert response.status_code == 422
    assert "codez" in response.json()["error"]["message"]
    _assert_nothing_recorded(settings)


def test_code_over_the_size_cap_is_refused(client: TestClient, settings: Settings) -> None:
    code = "x = 1\n" * (settings.sandbox_code_bytes // 6 + 10)
    response = client.post("/v1/executions", json={"code": code})
    assert response.status_code == 422
    assert "limit" in response.json()["error"]["message"]
    _assert_nothing_recorded(settings)


def test_timeout_above_the_maximum_is_refused(client: TestClient, settings: Settings) -> None:
    response = client.post(
        "/v1/executions",
        json={"code": "return 1", "timeout_s": settings.sandbox_max_wall_time_s + 1},
    )
    assert response.status_code == 422
    assert "timeout_s" in response.json()["error"]["message"]
    _assert_nothing_recorded(settings)


def test_unknown_tool_in_scope_is_named(client: TestClient, settings: Settings) -> None:
    response = client.post(
        "/v1/executions", json={"code": "return 1", "tools": ["nosuch:tool", "bad id"]}
    )
    assert response.status_code == 422
    response = client.post("/v1/executions", json={"code": "return 1", "tools": ["nosuch:tool"]})
    assert response.status_code == 422
    error = response.json()["error"]
    assert "nosuch:tool" in error["message"]
    _assert_nothing_recorded(settings)


def test_unknown_execution_id_is_a_404(client: TestClient) -> None:
    for execution_id in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        response = client.get(f"/v1/executions/{execution_id}")
        assert response.status_code == 404
        assert response.json()["error"]["type"] == "not_found"
        assert client.get(f"/v1/executions/{execution_id}/events").status_code == 404


def test_a_valid_submission_is_recorded_and_queued_once_per_idempotency_key(
    client: TestClient, settings: Settings
) -> None:
    body = {"code": "return 1", "intent": "one", "idempotency_key": "k-1"}
    first = client.post("/v1/executions", json=body)
    second = client.post("/v1/executions", json=body)
    assert first.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert first.json()["status"] == "queued"
    assert _executions(settings) == 1
    assert _queued_messages(settings) == 1


def test_healthz_reports_both_dependencies(
    client: TestClient,
    toolhost: Callable[..., ToolhostProcess],
    celery_worker: Callable[..., Proc],
    settings: Settings,
    tmp_path: Path,
) -> None:
    # /healthz is 200 only with a ready toolhost and a live sandbox worker too.
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
    start_sandbox_worker(settings, celery_worker)
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["checks"]["postgres"]["ok"] and body["checks"]["redis"]["ok"]


def test_healthz_names_redis_when_it_is_down(client: TestClient) -> None:
    state = client.app.state.gateway  # type: ignore[attr-defined]
    state.redis = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["redis"]


def test_openapi_documents_the_v1_api(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/v1/executions",
        "/v1/executions/{execution_id}",
        "/v1/tools/search",
        "/healthz",
    } <= set(paths)


def test_every_query_parameter_is_bounded_by_what_can_be_sent_and_stored(
    client: TestClient,
) -> None:
    """A query value the API accepts can be sent and used: the HTTP server refuses a request
    line over 64 KiB outside our code (a bare 400), so each text parameter is bounded and the
    longest valid request, every character percent-encoded as 4 bytes (12 characters), fits;
    every whole number fits a Postgres integer (else a 500 "out of range")."""
    worst_case: dict[str, int] = {}
    unbounded: list[str] = []
    for path, operations in client.get("/openapi.json").json()["paths"].items():
        for method, operation in operations.items():
            size = len(path) + 64  # method, "HTTP/1.1", separators and parameter names
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "query":
                    continue
                schema = parameter["schema"]
                numbers = [s for s in schema.get("anyOf", [schema]) if s.get("type") == "integer"]
                if any(s.get("maximum", SQL_INT_MAX + 1) > SQL_INT_MAX for s in numbers):
                    unbounded.append(f"{method.upper()} {path} ?{parameter['name']} (integer)")
                texts = [s for s in schema.get("anyOf", [schema]) if s.get("type") == "string"]
                if not texts or any("enum" in s or "const" in s or "format" in s for s in texts):
                    continue
                if any("maxLength" not in s for s in texts):
                    unbounded.append(f"{method.upper()} {path} ?{parameter['name']}")
                    continue
                size += len(parameter["name"]) + 2 + 12 * max(s["maxLength"] for s in texts)
            worst_case[f"{method.upper()} {path}"] = size
    assert not unbounded, unbounded
    too_long = {op: size for op, size in worst_case.items() if size > REQUEST_TARGET_BYTES}
    assert not too_long, too_long


def test_dashboard_and_graph_api_serve_what_the_page_draws(
    client: TestClient, settings: Settings
) -> None:
    with connect(settings.database_url or "") as conn:
        conn.execute(
            "INSERT INTO tools (id, server, name, description, schema_hash, pagerank, community) "
            "VALUES ('s:a', 's', 'a', 'first', 'h', 0.6, 0), ('s:b', 's', 'b', 'second', 'h', 0.4, 0)"
        )
        conn.execute(
            "INSERT INTO tool_edges (src, dst, kind, weight, count) VALUES ('s:a', 's:b', 'sequence', 1, 1)"
        )
        conn.commit()
    page = client.get("/dashboard")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    script = client.get("/static/dashboard.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "/api/graph/hypergraph" in script.text and "/api/capabilities" in script.text
    tools = client.get("/api/graph/tools").json()
    assert {n["data"]["id"]: (n["data"]["pagerank"], n["data"]["community"]) for n in tools["nodes"]} == {
        "s:a": (0.6, 0), "s:b": (0.4, 0)
    }  # fmt: skip
    assert [
        (e["data"]["source"], e["data"]["target"], e["data"]["kind"]) for e in tools["edges"]
    ] == [("s:a", "s:b", "sequence")]
    graph = client.get("/api/graph/hypergraph").json()  # no capability yet: nothing to hold tools
    assert graph["nodes"] == [] and graph["capabilities_count"] == 0
    assert client.get("/api/capabilities").json()["total"] == 0


def _nested(levels: int) -> dict[str, Any]:
    """An args object nesting ``levels`` levels as the sandbox wire counts them (args itself is 1)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def _nested_text(levels: int) -> bytes:
    """The same as JSON text, built without recursion (100k levels cannot go through json.dumps)."""
    return b'{"code":"return 1","args":' + b'{"a":' * (levels - 1) + b"{}" + b"}" * levels


def _assert_envelope(response: Any, status: int, type_: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["type"] == type_ and error["message"]
    return error


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"code": "return 1\x00"}, "code"),
        ({"code": "return 1", "intent": "add\x00"}, "intent"),
        ({"code": "return 1", "args": {"a": {"b": "x\x00y"}}}, "args.a.b"),
        ({"code": "return 1", "args": {"a": [1, "\x00"]}}, "args.a.1"),
        ({"code": "return 1", "args": {"a": {"b\x00": 1}}}, "args.a.b\\u0000"),
        ({"code": "return 1", "idempotency_key": "k\x00"}, "idempotency_key"),
    ],
)
def test_nul_in_any_text_field_is_a_422_naming_the_field(
    client: TestClient, settings: Settings, body: dict[str, Any], field: str
) -> None:
    error = _assert_envelope(client.post("/v1/executions", json=body), 422, "validation_error")
    assert [d["field"] for d in error["details"]] == [field]
    assert "NUL" in error["message"] and field in error["message"]
    _assert_nothing_recorded(settings)


def test_nul_in_searches_and_urls_is_a_422(client: TestClient) -> None:
    for path, body, field in [
        ("/v1/tools/search", {"query": "add\x00"}, "query"),
        ("/v1/tools/search", {"query": "add", "context_tools": ["a:\x00"]}, "context_tools.0"),
        ("/v1/capabilities/search", {"intent": "add\x00"}, "intent"),
        ("/v1/capabilities/x/execute", {"args": {"\x00": 1}}, "args.\\u0000"),
    ]:
        error = _assert_envelope(client.post(path, json=body), 422, "validation_error")
        assert [d["field"] for d in error["details"]] == [field]
    error = _assert_envelope(
        client.post("/v1/capabilities/a%00b/execute", json={}), 422, "validation_error"
    )
    assert error["details"]["field"] == "path"
    error = _assert_envelope(
        client.get("/api/capabilities?min_success_rate=%00"), 422, "validation_error"
    )
    assert error["details"]["field"] == "query"


@pytest.mark.parametrize("query", ["", " ", "\t\n  "])
def test_a_blank_tool_search_is_a_422_naming_the_query(client: TestClient, query: str) -> None:
    error = _assert_envelope(
        client.post("/v1/tools/search", json={"query": query}), 422, "validation_error"
    )
    assert [d["field"] for d in error["details"]] == ["query"]


@pytest.mark.parametrize("levels", [65, 253, 254, 1000, 100_000])
def test_args_nested_past_the_sandbox_limit_are_a_422_naming_the_limit(
    client: TestClient, settings: Settings, levels: int
) -> None:
    response = client.post(
        "/v1/executions",
        content=_nested_text(levels),
        headers={"content-type": "application/json"},
    )
    error = _assert_envelope(response, 422, "nesting_limit")
    assert str(VALUE_DEPTH) in error["message"]
    assert error["details"]["limit"] in (VALUE_DEPTH, BODY_DEPTH)
    _assert_nothing_recorded(settings)


def test_the_gateway_nesting_cap_is_the_sandbox_wire_cap() -> None:
    assert VALUE_DEPTH == wire.MAX_DEPTH
    wire.dumps_bounded(_nested(VALUE_DEPTH), max_bytes=1 << 20)
    with pytest.raises(wire.ValueTooDeep):
        wire.dumps_bounded(_nested(VALUE_DEPTH + 1), max_bytes=1 << 20)


def test_args_at_the_nesting_limit_are_accepted_and_run(
    client: TestClient, celery_worker: Callable[..., Proc]
) -> None:
    celery_worker("workers.sandbox.celery_app", "executions")
    code = "depth = 0\nv = args\nwhile isinstance(v, dict) and 'a' in v:\n    v = v['a']\n    depth += 1\nreturn depth + 1"
    response = client.post(
        "/v1/executions",
        json={"code": code, "args": _nested(VALUE_DEPTH), "wait": True, "timeout_s": 30},
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded", response.json()
    assert response.json()["result"] == VALUE_DEPTH


def test_a_body_over_the_size_cap_is_a_413(client: TestClient, settings: Settings) -> None:
    cap = body_bytes_cap(
        code_bytes=settings.sandbox_code_bytes, args_bytes=settings.sandbox_tool_args_bytes
    )
    response = client.post(
        "/v1/executions", content=b" " * (cap + 1), headers={"content-type": "application/json"}
    )
    error = _assert_envelope(response, 413, "body_too_large")
    assert error["details"]["limit"] == cap
    _assert_nothing_recorded(settings)


def test_unknown_paths_and_wrong_methods_get_the_envelope(client: TestClient) -> None:
    _assert_envelope(client.put("/v1/executions"), 405, "method_not_allowed")
    _assert_envelope(client.delete("/v1/tools"), 405, "method_not_allowed")
    error = _assert_envelope(client.get("/v1/nothing-here"), 404, "not_found")
    assert "/v1/nothing-here" in error["message"]
    _assert_envelope(client.get("/"), 404, "not_found")


def test_a_body_that_is_not_json_gets_the_envelope(client: TestClient, settings: Settings) -> None:
    for content in (b"", b"[1, 2", b"\xff\xfe", b'{"code": "return 1"} trailing', b"null"):
        response = client.post(
            "/v1/executions", content=content, headers={"content-type": "application/json"}
        )
        assert 400 <= response.status_code < 500, response.text
        assert set(response.json()["error"]) >= {"type", "message"}
    _assert_nothing_recorded(settings)
