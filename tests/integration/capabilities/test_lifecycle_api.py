"""Capability lifecycle over REST: manual creation, versions, edits, deletion, tenant isolation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from shared.config import Settings
from shared.db import connect
from shared.learning.maintenance import prune_idle_capabilities
from tests.integration.capabilities.conftest import Headers, sql

ITEM_KEYS = {
    "id", "name", "description", "code", "intent", "aliases", "tools_used", "approval_tools",
    "parameters_schema", "success_rate", "usage_count", "last_used", "created_at",
    "community_id", "version", "versions", "source", "disabled", "language",
}  # fmt: skip
GREET_V1 = 'return "hello " + args["who"]'
GREET_V2 = 'who = args["who"]\nreturn f"hello, {who}!" * args.get("times", 1)'


def _detail(item: dict[str, Any]) -> dict[str, Any]:
    """A capability as GET /v1/capabilities/{id} shows it: the item, and who taught it by their
    runs (nobody, for one written by hand)."""
    return {**item, "learned_from": []}


def _create(client: TestClient, auth: Headers, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/capabilities", json=body, headers=auth)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_manual_capability_gets_an_inferred_schema_and_runs(
    client: TestClient, keys: Callable[[str], Headers]
) -> None:
    auth = keys("acme")
    created = _create(client, auth, code=GREET_V1, intent="greet someone by name")
    assert set(created) == ITEM_KEYS
    assert created["source"] == "manual" and created["version"] == 1
    assert created["name"] == "greet_someone_name"
    assert created["parameters_schema"]["required"] == ["who"]
    assert created["usage_count"] == 0 and created["aliases"] == []
    shown = client.get(f"/v1/capabilities/{created['id']}", headers=auth).json()
    assert shown == _detail(created)
    run = client.post(
        f"/v1/capabilities/{created['id']}/execute", json={"args": {"who": "Ada"}}, headers=auth
    )
    assert run.status_code == 202, run.text
    refused = client.post(
        f"/v1/capabilities/{created['id']}/execute", json={"args": {}}, headers=auth
    )
    assert _error(refused, 422)["type"] == "validation_error"  # the inferred schema is enforced


def test_bad_manual_capabilities_are_refused_naming_the_field(
    client: TestClient, keys: Callable[[str], Headers]
) -> None:
    auth = keys("acme")
    bad_code = client.post(
        "/v1/capabilities", json={"code": "return (", "intent": "x"}, headers=auth
    )
    assert _error(bad_code, 422)["details"]["field"] == "code"
    bad_name = client.post(
        "/v1/capabilities",
        json={"code": "return 1", "intent": "x", "name": "Bad Name"},
        headers=auth,
    )
    assert _error(bad_name, 422)["details"]["field"] == "name"
    no_intent = client.post("/v1/capabilities", json={"code": "return 1"}, headers=auth)
    assert _error(no_intent, 422)["details"][0]["field"] == "intent"
    first = _create(client, auth, code="return 1", intent="one")
    again = client.post(
        "/v1/capabilities", json={"code": "return  1  # same", "intent": "uno"}, headers=auth
    )
    conflict = _error(again, 409)
    assert conflict["details"]["capability_id"] == first["id"]


def test_new_code_under_a_name_is_the_next_version_and_the_old_one_still_runs(
    client: TestClient, keys: Callable[[str], Headers], settings: Settings
) -> None:
    auth = keys("acme")
    v1 = _create(client, auth, code=GREET_V1, intent="greet someone", name="greet")
    v2 = _create(client, auth, code=GREET_V2, intent="greet someone warmly", name="greet")
    assert (v1["version"], v2["version"]) == (1, 2)
    assert "times" in v2["parameters_schema"]["properties"]
    versions = client.get(f"/v1/capabilities/{v1['id']}/versions", headers=auth).json()
    assert [(v["id"], v["version"]) for v in versions["versions"]] == [(v1["id"], 1), (v2["id"], 2)]
    assert client.get(f"/v1/capabilities/{v2['id']}/versions", headers=auth).json() == versions

    by_id = client.post(
        f"/v1/capabilities/{v1['id']}/execute", json={"args": {"who": "Ada"}}, headers=auth
    ).json()
    by_name = client.post(
        "/v1/capabilities/greet/execute", json={"args": {"who": "Ada"}}, headers=auth
    ).json()
    ran = {
        r["capability_id"]: r["code"]
        for r in sql(
            settings,
            "SELECT capability_id::text, code FROM executions WHERE id = ANY(%s::uuid[])",
            ([by_id["id"], by_name["id"]],),
        )
    }
    assert ran == {v1["id"]: GREET_V1, v2["id"]: GREET_V2}  # the name runs the latest


def test_patch_changes_only_what_is_given_and_aliases_replace(
    client: TestClient, keys: Callable[[str], Headers], settings: Settings
) -> None:
    auth = keys("acme")
    created = _create(
        client, auth, code=GREET_V1, intent="greet someone", aliases=["say hi", "wave"]
    )
    assert created["aliases"] == ["say hi", "wave"]
    url = f"/v1/capabilities/{created['id']}"
    renamed = client.patch(url, json={"name": "hello"}, headers=auth).json()
    assert renamed["name"] == "hello" and renamed["intent"] == "greet someone"
    assert renamed["aliases"] == ["say hi", "wave"]
    edited = client.patch(
        url,
        json={"intent": "welcome a visitor", "aliases": ["greet a guest"], "description": "Hi."},
        headers=auth,
    ).json()
    assert (edited["name"], edited["intent"], edited["description"]) == (
        "hello", "welcome a visitor", "Hi."
    )  # fmt: skip
    assert edited["aliases"] == ["greet a guest"]
    assert edited["code"] == GREET_V1 and edited["version"] == 1
    assert client.get(url, headers=auth).json() == _detail(edited)
    # Untried code scores zero in search (semantic * reliability): say it ran well.
    sql(settings, "UPDATE capabilities SET success_rate = 1, usage_count = 3")
    found = client.post(
        "/v1/capabilities/search", json={"intent": "greet a guest"}, headers=auth
    ).json()
    assert found["capabilities"][0]["id"] == created["id"]  # matched by its new alias
    assert _error(client.patch(url, json={}, headers=auth), 422)["details"]["field"] == "body"
    assert (
        _error(client.patch(url, json={"name": "9x"}, headers=auth), 422)["details"]["field"]
        == "name"
    )
    unknown = client.patch(url, json={"colour": "red"}, headers=auth)
    assert _error(unknown, 422)["details"][0]["field"] == "colour"
    missing = client.patch(
        "/v1/capabilities/00000000-0000-0000-0000-000000000000", json={"name": "x"}, headers=auth
    )
    assert _error(missing, 404)["type"] == "not_found"


def test_delete_removes_it_from_the_list(
    client: TestClient, keys: Callable[[str], Headers]
) -> None:
    auth = keys("acme")
    keep = _create(client, auth, code="return 1", intent="one")
    gone = _create(client, auth, code="return 2", intent="two")
    assert client.delete(f"/v1/capabilities/{gone['id']}", headers=auth).status_code == 204
    assert _error(client.delete(f"/v1/capabilities/{gone['id']}", headers=auth), 404)
    listed = client.get("/api/capabilities", headers=auth).json()
    assert [c["id"] for c in listed["capabilities"]] == [keep["id"]] and listed["total"] == 1


def test_manual_capabilities_are_never_pruned(
    client: TestClient, keys: Callable[[str], Headers], settings: Settings
) -> None:
    auth = keys("acme")
    kept = _create(client, auth, code="return 1", intent="one")
    learned = _create(client, auth, code="return 2", intent="two")
    sql(
        settings,
        "UPDATE capabilities SET created_at = now() - interval '400 days', usage_count = 0, "
        "source = CASE WHEN id = %s THEN 'emergent' ELSE source END",
        (learned["id"],),
    )
    with connect(settings.database_url or "") as conn:
        assert prune_idle_capabilities(conn, dry_run=False) == 1
        conn.commit()
    listed = client.get("/api/capabilities", headers=auth).json()
    assert [c["id"] for c in listed["capabilities"]] == [kept["id"]]


def test_another_tenant_can_neither_see_nor_change_nor_export(
    client: TestClient, keys: Callable[[str], Headers]
) -> None:
    mine, theirs = keys("acme"), keys("globex")
    created = _create(client, mine, code=GREET_V1, intent="greet someone", name="greet")
    url = f"/v1/capabilities/{created['id']}"
    assert client.get("/api/capabilities", headers=theirs).json() == {
        "capabilities": [],
        "total": 0,
    }
    for response in (
        client.get(url, headers=theirs),
        client.patch(url, json={"name": "stolen"}, headers=theirs),
        client.delete(url, headers=theirs),
        client.get(f"{url}/versions", headers=theirs),
        client.get("/v1/capabilities/export", params={"ids": created["id"]}, headers=theirs),
    ):
        assert _error(response, 404)["type"] == "not_found"
    assert client.get("/v1/capabilities/export", headers=theirs).json()["capabilities"] == []
    # Their own "greet" is version 1 of their own family, not version 2 of ours.
    own = _create(client, theirs, code=GREET_V2, intent="greet", name="greet")
    assert own["version"] == 1
    assert client.get(url, headers=mine).json() == _detail(created)
