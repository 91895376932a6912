"""Whose an MCP session is (``holder_of``), and which requests set something a take-over
must set again (``settings_kept``): pure logic, no Redis."""

from __future__ import annotations

from services.gateway.mcp.replicas.registry import holder_of
from services.gateway.mcp.replicas.settings_kept import setting_of
from shared.auth.principal import ANONYMOUS, Principal


def test_a_session_is_held_by_its_key_else_its_person_else_its_tenant() -> None:
    key = Principal(tenant_id="acme", key_id="k1")
    same_tenant = Principal(tenant_id="acme", key_id="k2")
    person = Principal(tenant_id="acme", user="sub-1", key_id=None)
    same_sub_elsewhere = Principal(tenant_id="other", user="sub-1")
    holders = [holder_of(p) for p in (key, same_tenant, person, same_sub_elsewhere, ANONYMOUS)]
    assert len(set(holders)) == len(holders), holders
    # A person's holder does not change with the token: same tenant and subject, new scopes.
    renewed = Principal(tenant_id="acme", user="sub-1", scopes=frozenset({"agentcards:read"}))
    assert holder_of(renewed) == holder_of(person)


def test_the_requests_a_take_over_sets_again() -> None:
    uri = "demo://resource/static/document/architecture.md"
    level = {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "info"}}
    subscribe = {"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": {"uri": uri}}
    unsubscribe = {**subscribe, "method": "resources/unsubscribe"}
    assert setting_of(level) == ("logging/setLevel", True)
    assert setting_of(subscribe) == (f"resources/subscribe {uri}", True)
    assert setting_of(unsubscribe) == (f"resources/subscribe {uri}", False)
    listed = {"jsonrpc": "2.0", "id": 5, "method": "resources/list"}
    notified = {"jsonrpc": "2.0", "method": "logging/setLevel", "params": {"level": "info"}}
    no_uri = {"jsonrpc": "2.0", "id": 6, "method": "resources/subscribe", "params": {}}
    for other in (listed, notified, no_uri, [level], "logging/setLevel"):
        assert setting_of(other) is None, other
