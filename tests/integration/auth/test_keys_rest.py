"""API keys at the REST boundary: 401 without a valid key, tenants isolated, limits, audit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.auth.cache import CACHE_TTL_S
from shared.auth.store import revoke_key
from shared.config import Settings
from shared.db import connect
from shared.embeddings import get_embedder
from tests.integration.discovery.helpers import insert_capability, insert_tool

MakeKey = Callable[..., tuple[str, dict[str, str]]]
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def _assert_401(response: Any, *, body: dict[str, Any] | None = None) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert (response.json()["error"] if body is None else body)["type"] == "unauthorized"


def _revoke(settings: Settings, key_id: str) -> None:
    with connect(settings.database_url or "") as conn:
        revoke_key(conn, key_id=key_id)
        conn.commit()


def test_no_key_means_loopback_anonymous_as_before(client: TestClient) -> None:
    assert client.get("/v1/tools").status_code == 200
    assert client.get("/healthz").status_code in (200, 503)  # no toolhost here: 503 is honest


def test_once_a_key_exists_rest_sse_and_mcp_need_it(settings: Settings, make_key: MakeKey) -> None:
    key_id, auth = make_key("acme")
    revoked_id, revoked = make_key("acme", name="old")
    _revoke(settings, revoked_id)
    app = create_app(settings)  # the Host header the MCP SDK accepts on a loopback gateway
    with TestClient(app, base_url="http://127.0.0.1:8420", client=("127.0.0.1", 50000)) as client:
        queued = client.post("/v1/executions", json={"code": "return 1"}, headers=auth)
        assert queued.status_code == 202, queued.text
        events = f"/v1/executions/{queued.json()['id']}/events"
        for headers in ({}, revoked, {"Authorization": "Bearer ack_" + "x" * 43}):
            _assert_401(client.get("/v1/tools", headers=headers))
            _assert_401(client.post("/v1/executions", json={"code": "return 1"}, headers=headers))
            _assert_401(client.get(events, headers=headers))
            # /mcp: a JSON-RPC error carrying our body, which MCP clients read (test_mcp_refusal)
            mcp = client.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, **headers})
            _assert_401(mcp, body=mcp.json()["error"]["data"] if mcp.status_code == 401 else {})
            _assert_401(client.get("/api/capabilities", headers=headers))
        _assert_401(client.get("/v1/tools", headers={"Authorization": "Basic eDp5"}))
        assert client.get("/v1/tools", headers=auth).status_code == 200
        assert client.get(f"/v1/executions/{queued.json()['id']}", headers=auth).status_code == 200
        mcp = client.post("/mcp", json=MCP_INIT, headers={**MCP_HEADERS, **auth})
        assert mcp.status_code == 200, mcp.text
        # Health and docs stay open to a loopback client; docs to anyone.
        assert client.get("/healthz").status_code in (200, 503)
        assert client.get("/openapi.json").status_code == 200

        # A key revoked while in use stops working once its cache entry lapses.
        _revoke(settings, key_id)
        time.sleep(CACHE_TTL_S + 0.5)
        _assert_401(client.get("/v1/tools", headers=auth))


@pytest.mark.parametrize("public", [False, True])
def test_health_beyond_loopback_needs_a_key_unless_public(
    settings: Settings, make_key: MakeKey, public: bool
) -> None:
    _, auth = make_key("acme")
    settings = settings.model_copy(update={"public_health": public})
    with TestClient(create_app(settings), client=("10.1.2.3", 40000)) as remote:
        for path in ("/healthz", "/metrics"):
            if public:
                assert remote.get(path).status_code != 401
            else:
                _assert_401(remote.get(path))
            assert remote.get(path, headers=auth).status_code != 401


def _capability(settings: Settings, *, tenant: str, name: str, intent: str) -> str:
    (vector,) = get_embedder(settings).embed([intent])
    with connect(settings.database_url or "") as conn:
        cap = insert_capability(
            conn,
            name=name,
            embedding=vector,
            success_rate=1.0,
            usage_count=10,
            tools_used=["files:read_file"],
            community=0,
            tenant_id=tenant,
        )
        conn.commit()
    return cap


def test_one_tenant_never_sees_another_tenants_anything(
    settings: Settings, make_key: MakeKey
) -> None:
    _, a = make_key("tenant-a")
    _, b = make_key("tenant-b")
    with connect(settings.database_url or "") as conn:
        insert_tool(conn, tool_id="files:read_file", description="read a file", embedding=None,
                    community=0)  # fmt: skip
    cap_a = _capability(settings, tenant="tenant-a", name="parse_yaml_a",
                        intent="Parse a YAML configuration file")  # fmt: skip
    cap_b = _capability(settings, tenant="tenant-b", name="parse_yaml_b",
                        intent="Parse a YAML config file into a dict")  # fmt: skip
    search = {"intent": "read the settings from a yaml config file", "include_suggestions": True}
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        run = client.post("/v1/executions", json={"code": "return 1"}, headers=a).json()
        path = f"/v1/executions/{run['id']}"
        assert client.get(path, headers=a).status_code == 200
        for request in (
            client.get(path, headers=b),
            client.get(f"{path}/events", headers=b),
            client.post(f"{path}/cancel", headers=b),
        ):
            assert request.status_code == 404
            assert request.json()["error"]["type"] == "not_found"
        assert [e["id"] for e in client.get("/v1/executions", headers=a).json()["executions"]] == [
            run["id"]
        ]
        assert client.get("/v1/executions", headers=b).json()["executions"] == []

        found_a = client.post("/v1/capabilities/search", json=search, headers=a).json()
        found_b = client.post("/v1/capabilities/search", json=search, headers=b).json()
        assert [c["id"] for c in found_a["capabilities"]] == [cap_a]
        assert [c["id"] for c in found_b["capabilities"]] == [cap_b]
        # Same tool community: only the tenant's own capabilities are ever suggested.
        assert cap_a not in {s["id"] for s in found_b["suggestions"]}
        assert cap_b not in {s["id"] for s in found_a["suggestions"]}
        listed = client.get("/api/capabilities", headers=b).json()
        assert [c["id"] for c in listed["capabilities"]] == [cap_b] and listed["total"] == 1
        graph = client.get("/api/graph/hypergraph", headers=b).json()
        assert f"cap:{cap_a}" not in {n["data"]["id"] for n in graph["nodes"]}
        for ref in (cap_a, "parse_yaml_a"):
            refused = client.post(f"/v1/capabilities/{ref}/execute", json={}, headers=b)
            assert refused.status_code == 404, refused.text
        assert (
            client.post(f"/v1/capabilities/{cap_b}/execute", json={}, headers=b).status_code == 202
        )


def test_rate_and_concurrency_limits_answer_429_with_retry_after(
    settings: Settings, make_key: MakeKey
) -> None:
    _, per_min = make_key("acme", executions_per_min=2)
    _, one_at_a_time = make_key("acme", max_concurrent=1)
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        for _ in range(2):
            assert (
                client.post(
                    "/v1/executions", json={"code": "return 1"}, headers=per_min
                ).status_code
                == 202
            )
        over = client.post("/v1/executions", json={"code": "return 1"}, headers=per_min)
        assert over.status_code == 429
        assert 1 <= int(over.headers["retry-after"]) <= 60
        assert over.json()["error"]["type"] == "rate_limited"
        assert "2 executions per minute" in over.json()["error"]["message"]

        first = client.post("/v1/executions", json={"code": "return 1"}, headers=one_at_a_time)
        assert first.status_code == 202
        busy = client.post("/v1/executions", json={"code": "return 2"}, headers=one_at_a_time)
        assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
        assert busy.json()["error"]["details"]["limit"] == "max_concurrent"
        # Once the first has ended (cancelled while queued), its slot is free again.
        assert (
            client.post(
                f"/v1/executions/{first.json()['id']}/cancel", headers=one_at_a_time
            ).status_code
            == 200
        )
        again = client.post("/v1/executions", json={"code": "return 3"}, headers=one_at_a_time)
        assert again.status_code == 202, again.text
        # An idempotent repeat starts nothing, so it takes no slot either.
        repeat = client.post(
            "/v1/executions",
            json={"code": "return 3", "idempotency_key": "same"},
            headers=one_at_a_time,
        )
        assert repeat.status_code == 429


def test_audit_log_records_executions_searches_and_key_changes(
    settings: Settings, make_key: MakeKey
) -> None:
    admin_id, admin = make_key("acme", admin=True)
    user_id, user = make_key("acme")
    _, other_admin = make_key("other", admin=True)
    _revoke(settings, user_id)
    _, user = make_key("acme", name="second")
    with TestClient(create_app(settings), client=("127.0.0.1", 50000)) as client:
        run = client.post(
            "/v1/executions",
            json={"code": "return 1", "args": {"secret": "hunter2"}},
            headers=admin,
        ).json()
        client.post("/v1/tools/search", json={"query": "add numbers"}, headers=admin)
        client.post("/v1/capabilities/search", json={"intent": "add numbers"}, headers=admin)
        forbidden = client.get("/v1/audit", headers=user)
        assert forbidden.status_code == 403
        assert forbidden.json()["error"]["type"] == "forbidden"
        entries = client.get("/v1/audit", headers=admin).json()["entries"]
        other = client.get("/v1/audit", headers=other_admin).json()["entries"]
    actions = [e["action"] for e in reversed(entries)]
    assert actions == ["key_create", "key_create", "key_revoke", "key_create", "execute",
                       "search", "search"]  # fmt: skip
    execute = next(e for e in entries if e["action"] == "execute")
    assert execute["execution_id"] == run["id"] and execute["key_id"] == admin_id
    assert len(execute["args_hash"]) == 64 and "hunter2" not in str(entries)
    assert {e["details"].get("kind") for e in entries if e["action"] == "search"} == {
        "tools",
        "capabilities",
    }
    assert all(e["tenant_id"] == "acme" for e in entries)
    assert [e["action"] for e in other] == ["key_create"]
