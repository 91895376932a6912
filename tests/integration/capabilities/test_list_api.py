"""`GET /api/capabilities`: every filter, every sort, paging, the item shape, and bad values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from shared.config import Settings
from tests.integration.capabilities.conftest import Headers, sql
from tests.integration.capabilities.test_lifecycle_api import ITEM_KEYS

# name: (code, intent, tools, usage, success rate, community, days since used, days old)
ROWS: dict[str, tuple[str, str, list[str], int, float, int | None, int | None, int]] = {
    "add_numbers": ("return await mcp.example.add(a=1, b=2)", "add two numbers",
                    ["example:add"], 10, 0.9, 1, 5, 30),
    "tell_time": ("return await mcp.time.get_current_time(timezone='UTC')", "what time is it",
                  ["time:get_current_time"], 3, 1.0, 2, 1, 20),
    "sum_and_time": ("a = await mcp.example.add(a=1, b=1)\n"
                     "return [a, await mcp.time.get_current_time(timezone='UTC')]",
                     "add then tell the time", ["example:add", "time:get_current_time"],
                     7, 0.5, 1, None, 10),
    "idle": ("return 0", "do nothing at all", [], 0, 0.0, None, None, 1),
}  # fmt: skip


@pytest.fixture
def listed(
    client: TestClient, keys: Callable[[str], Headers], settings: Settings
) -> tuple[Headers, dict[str, str]]:
    """Four capabilities of one tenant with chosen stats; its header and their ids by name."""
    auth = keys("acme")
    ids = {}
    for name, (code, intent, tools, usage, rate, community, used, age) in ROWS.items():
        body = {"code": code, "intent": intent, "name": name}
        if name == "idle":
            body["aliases"] = ["twiddle THUMBS"]
        created = client.post("/v1/capabilities", json=body, headers=auth).json()
        assert created["tools_used"] == tools
        ids[name] = created["id"]
        sql(
            settings,
            "UPDATE capabilities SET usage_count = %s, success_rate = %s, community = %s, "
            "last_used = now() - make_interval(days => %s), "
            "created_at = now() - make_interval(days => %s) WHERE id = %s",
            (usage, rate, community, used, age, created["id"]),
        )
    return auth, ids


def _names(client: TestClient, auth: Headers, **params: Any) -> list[str]:
    response = client.get("/api/capabilities", params=params, headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"capabilities", "total"}
    return [c["name"] for c in body["capabilities"]]


def test_each_filter_narrows_the_list(
    client: TestClient, listed: tuple[Headers, dict[str, str]]
) -> None:
    auth, _ = listed
    assert _names(client, auth) == ["add_numbers", "sum_and_time", "tell_time", "idle"]
    assert _names(client, auth, community_id=1) == ["add_numbers", "sum_and_time"]
    assert _names(client, auth, min_success_rate=0.9) == ["add_numbers", "tell_time"]
    assert _names(client, auth, min_usage=5) == ["add_numbers", "sum_and_time"]
    assert _names(client, auth, q="TIME") == ["sum_and_time", "tell_time"]  # name or intent
    assert _names(client, auth, q="thumbs") == ["idle"]  # an alias
    assert _names(client, auth, q="uses example:add.") == ["add_numbers"]  # the description
    assert _names(client, auth, q="100%") == []  # LIKE wildcards are literal
    assert _names(client, auth, server="time") == ["sum_and_time", "tell_time"]
    assert _names(client, auth, tool="example:add") == ["add_numbers", "sum_and_time"]
    assert _names(client, auth, tool="get_current_time") == ["sum_and_time", "tell_time"]
    assert _names(client, auth, server="example", min_success_rate=0.6) == ["add_numbers"]


def test_sorts_and_pages(client: TestClient, listed: tuple[Headers, dict[str, str]]) -> None:
    auth, _ = listed
    assert _names(client, auth, sort="usage") == [
        "add_numbers", "sum_and_time", "tell_time", "idle"
    ]  # fmt: skip
    assert _names(client, auth, sort="success_rate") == [
        "tell_time", "add_numbers", "sum_and_time", "idle"
    ]  # fmt: skip
    assert _names(client, auth, sort="last_used") == [
        "tell_time",
        "add_numbers",
        "sum_and_time",
        "idle",
    ]  # fmt: skip  (never used: last)
    assert _names(client, auth, sort="created_at") == [
        "idle", "sum_and_time", "tell_time", "add_numbers"
    ]  # fmt: skip
    page = client.get("/api/capabilities", params={"limit": 2, "offset": 1}, headers=auth).json()
    assert [c["name"] for c in page["capabilities"]] == ["sum_and_time", "tell_time"]
    assert page["total"] == 4


def test_items_have_exactly_the_contract_fields(
    client: TestClient, listed: tuple[Headers, dict[str, str]]
) -> None:
    auth, ids = listed
    items = client.get("/api/capabilities", params={"q": "idle"}, headers=auth).json()
    (item,) = items["capabilities"]
    assert set(item) == ITEM_KEYS
    assert item["id"] == ids["idle"] and item["aliases"] == ["twiddle THUMBS"]
    assert item["source"] == "manual" and item["version"] == 1
    assert item["community_id"] is None and item["last_used"] is None
    assert item["parameters_schema"] == {"type": "object", "properties": {}}
    (timed,) = client.get("/api/capabilities", params={"q": "tell_time"}, headers=auth).json()[
        "capabilities"
    ]
    assert timed["community_id"] == 2 and timed["usage_count"] == 3
    assert timed["tools_used"] == ["time:get_current_time"] and timed["last_used"]


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("community_id", "abc"),
        ("community_id", "-1"),
        ("min_success_rate", "1.5"),
        ("min_success_rate", "nan"),
        ("min_usage", "-1"),
        ("min_usage", "many"),
        ("q", "x" * 201),
        ("sort", "name"),
        ("limit", "0"),
        ("limit", "501"),
        ("offset", "-1"),
    ],
)
def test_bad_values_are_a_422_naming_the_field(
    client: TestClient, keys: Callable[[str], Headers], param: str, value: str
) -> None:
    response = client.get("/api/capabilities", params={param: value}, headers=keys("acme"))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "validation_error"
    assert [p["field"] for p in error["details"]] == [f"query.{param}"]
    assert param in error["message"]


def test_a_nul_anywhere_in_the_query_is_refused(
    client: TestClient, keys: Callable[[str], Headers]
) -> None:
    for param in ("q", "server", "tool"):
        response = client.get("/api/capabilities", params={param: "a\x00"}, headers=keys("acme"))
        assert response.status_code == 422, response.text
        assert response.json()["error"]["details"]["field"] == "query"
