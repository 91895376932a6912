"""Bad input to the REST API: a clear 4xx with a structured error, and nothing recorded or queued."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import redis
from fastapi.testclient import TestClient

from shared.config import Settings
from shared.db import connect
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
    client: TestClient, toolhost: Callable[..., ToolhostProcess], tmp_path: Path
) -> None:
    # /healthz is 200 only with a ready toolhost too (see test_healthz.py).
    toolhost(write_config(tmp_path / "mcp.json", {"example": example_server(tmp_path)}))
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
    assert "/api/graph/hypergraph" in page.text and "/api/capabilities" in page.text
    graph = client.get("/api/graph/hypergraph").json()
    assert {n["id"] for n in graph["nodes"]} == {"s:a", "s:b"}
    assert graph["edges"] == [
        {"src": "s:a", "dst": "s:b", "kind": "sequence", "weight": 1.0, "count": 1}
    ]
    assert client.get("/api/capabilities").json()["total"] == 0
