"""Export and import: a bundle round-trips between tenants and databases, duplicates merge."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from services.gateway.app import create_app
from shared.config import Settings
from tests.integration.capabilities.conftest import Headers, sql
from tests.integration.capabilities.test_lifecycle_api import GREET_V1, GREET_V2
from tests.stack import TEMPLATE_DB, with_database

# What differs between installs, by design: ids (and so families, named by their first
# version's id) and when the bundle was made.
INSTALL_SPECIFIC = ("id", "family")


def _export(client: TestClient, auth: Headers, **params: Any) -> dict[str, Any]:
    response = client.get("/v1/capabilities/export", params=params, headers=auth)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _import(client: TestClient, auth: Headers, bundle: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/capabilities/import", json=bundle, headers=auth)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _portable(bundle: dict[str, Any]) -> dict[str, Any]:
    """The bundle without what is install-specific; families as groups of names and versions."""
    families: dict[str, list[tuple[str, int]]] = {}
    for c in bundle["capabilities"]:
        families.setdefault(c["family"], []).append((c["name"], c["version"]))
    return {
        "format": bundle["format"],
        "format_version": bundle["format_version"],
        "capabilities": [
            {k: v for k, v in c.items() if k not in INSTALL_SPECIFIC}
            for c in bundle["capabilities"]
        ],
        "families": sorted(sorted(f) for f in families.values()),
    }


def _populate(client: TestClient, auth: Headers, settings: Settings) -> list[str]:
    """Two versions of `greet` with aliases and stats, and one used capability; their ids."""
    ids = []
    for body in (
        {"code": GREET_V1, "intent": "greet someone", "name": "greet", "aliases": ["say hi"]},
        {"code": GREET_V2, "intent": "greet someone warmly", "name": "greet"},
        {"code": "return await mcp.example.add(a=args['a'], b=2)", "intent": "add two"},
    ):
        created = client.post("/v1/capabilities", json=body, headers=auth)
        assert created.status_code == 201, created.text
        ids.append(created.json()["id"])
    sql(
        settings,
        "UPDATE capabilities SET usage_count = 9, success_count = 8, failure_count = 1, "
        "success_rate = 8.0 / 9, avg_duration_ms = 12.5, last_used = now(), "
        "promoted_at = now(), source = 'emergent' WHERE id = %s",
        (ids[2],),
    )
    return ids


@pytest.fixture
def other_install(embedded_pg: Any, redis_url: str, tmp_path: Any) -> Iterator[Settings]:
    """Settings of a second, empty database: another install."""
    dbname = f"other_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {dbname} TEMPLATE {TEMPLATE_DB}")
    yield Settings(
        database_url=with_database(embedded_pg.url, dbname),
        redis_url=redis_url,
        env="test",
        home=tmp_path / "other-home",
    )
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")


def test_a_bundle_round_trips_into_another_install_exactly(
    client: TestClient, keys: Callable[[str], Headers], settings: Settings, other_install: Settings
) -> None:
    auth = keys("acme")
    _populate(client, auth, settings)
    exported = _export(client, auth)
    assert exported["format"] == "agentcards.capabilities" and exported["format_version"] == 1
    assert [(c["name"], c["version"]) for c in exported["capabilities"]] == [
        ("add_two", 1), ("greet", 1), ("greet", 2)
    ]  # fmt: skip
    greet_v1 = exported["capabilities"][1]
    assert greet_v1["aliases"] == ["say hi"] and greet_v1["source"] == "manual"
    assert greet_v1["parameters_schema"]["required"] == ["who"]
    added = exported["capabilities"][0]["stats"]
    assert added["usage_count"] == 9 and added["avg_duration_ms"] == 12.5

    with TestClient(create_app(other_install), client=("127.0.0.1", 50000)) as there:
        done = _import(there, {}, exported)  # no keys there: the default tenant
        assert (done["created"], done["merged"]) == (3, 0)
        again = _export(there, {})
        assert _portable(again) == _portable(exported)
        # Importing it again merges every entry and doubles nothing.
        redo = _import(there, {}, exported)
        assert (redo["created"], redo["merged"]) == (0, 3)
        assert _portable(_export(there, {})) == _portable(exported)
        # The imported versions stay one capability: listed once, at its latest version.
        listed = there.get("/api/capabilities", params={"q": "greet"}).json()
        assert [(c["version"], c["versions"]) for c in listed["capabilities"]] == [(2, 2)]


def test_duplicates_merge_and_selected_ids_export(
    client: TestClient, keys: Callable[[str], Headers], settings: Settings
) -> None:
    auth, fresh = keys("acme"), keys("initech")
    ids = _populate(client, auth, settings)
    selected = _export(client, auth, ids=f"{ids[0]},{ids[2]}")
    assert [c["id"] for c in selected["capabilities"]] == [ids[2], ids[0]]  # name order
    # Into the same tenant: both merge into what is there (same code hash), none doubled.
    merged = _import(client, auth, selected)
    assert (merged["created"], merged["merged"]) == (0, 2)
    assert {c["id"] for c in merged["capabilities"]} == {ids[0], ids[2]}
    assert client.get("/api/capabilities", headers=auth).json()["total"] == 2  # greet v2, add
    # A bundle whose entry was used more elsewhere brings its stats; aliases are united.
    busier = {**selected["capabilities"][1]}
    busier["stats"] = {**busier["stats"], "usage_count": 50, "success_count": 50,
                       "success_rate": 1.0}  # fmt: skip
    busier["aliases"] = ["say hello"]
    _import(client, auth, {**selected, "capabilities": [busier]})
    greet = client.get(f"/v1/capabilities/{ids[0]}", headers=auth).json()
    assert (greet["usage_count"], greet["success_rate"]) == (50, 1.0)
    assert greet["aliases"] == ["say hi", "say hello"]
    # Into a fresh tenant: a bare version 2 keeps its number.
    only_v2 = _export(client, auth, ids=ids[1])
    created = _import(client, fresh, only_v2)["capabilities"]
    assert [(c["name"], c["version"], c["status"]) for c in created] == [("greet", 2, "created")]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.update(format="zip"), "format"),
        (lambda b: b.update(format_version=2), "format_version"),
        (lambda b: b["capabilities"][1].update(code="return ("), "capabilities.1.code"),
        (lambda b: b["capabilities"][1].update(name="No Spaces"), "capabilities.1.name"),
        (lambda b: b["capabilities"][1].update(version=0), "capabilities.1.version"),
        (
            lambda b: b["capabilities"][0]["stats"].update(success_rate=2),
            "capabilities.0.stats.success_rate",
        ),
        (lambda b: b["capabilities"][0].update(source="stolen"), "capabilities.0.source"),
        (lambda b: b["capabilities"][0].pop("intent"), "capabilities.0.intent"),
        (lambda b: b["capabilities"][0].update(colour="red"), "capabilities.0.colour"),
    ],
)
def test_a_bad_bundle_is_a_422_naming_the_field_and_adds_nothing(
    client: TestClient,
    keys: Callable[[str], Headers],
    settings: Settings,
    change: Callable[[dict[str, Any]], Any],
    field: str,
) -> None:
    auth, fresh = keys("acme"), keys("initech")
    _populate(client, auth, settings)
    bundle = _export(client, auth)
    change(bundle)
    response = client.post("/v1/capabilities/import", json=bundle, headers=fresh)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    details = error["details"]
    fields = [d["field"] for d in details] if isinstance(details, list) else [details["field"]]
    assert fields == [field]
    assert client.get("/api/capabilities", headers=fresh).json()["total"] == 0


def test_a_typescript_capability_keeps_its_language_through_create_export_and_import(
    client: TestClient, keys: Callable[[str], Headers]
) -> None:
    auth, fresh = keys("acme"), keys("initech")
    code = "const r = await mcp.example.add({ a: args.a, b: 2 });\nreturn r;"
    response = client.post(
        "/v1/capabilities",
        json={"code": code, "intent": "add two in TypeScript", "language": "typescript"},
        headers=auth,
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["language"] == "typescript"
    assert created["tools_used"] == ["example:add"]
    assert created["parameters_schema"]["required"] == ["a"]
    # The same text as Python is another capability (dedup is per language), not a conflict.
    python = client.post(
        "/v1/capabilities", json={"code": "return 1", "intent": "one"}, headers=auth
    )
    assert python.status_code == 201, python.text
    again = client.post(
        "/v1/capabilities",
        json={"code": "return 1", "intent": "one", "language": "typescript"},
        headers=auth,
    )
    assert again.status_code == 201, again.text
    bundle = _export(client, auth)
    languages = {c["code"]: c["language"] for c in bundle["capabilities"]}
    assert languages[code] == "typescript"
    _import(client, fresh, bundle)
    imported = client.get("/api/capabilities", headers=fresh).json()["capabilities"]
    assert sorted(i["language"] for i in imported) == ["python", "typescript", "typescript"]
