"""The gateway's MCP names for downstream resources: agentcards://<server>/<the server's URI>,
and ui://<server>/<path> for an MCP Apps UI shown to a client that declared Apps."""

from __future__ import annotations

import pytest

from services.gateway.mcp.apps import listed_meta
from services.gateway.ops.downstream_resources import gateway_uri, split_gateway_uri
from shared.errors import ValidationFailed


def test_a_gateway_uri_round_trips_with_the_servers_own_uri() -> None:
    uri = "demo://resource/static/document/architecture.md"
    named = gateway_uri("everything", uri)
    assert named == "agentcards://everything/demo://resource/static/document/architecture.md"
    assert split_gateway_uri(named) == ("everything", uri)
    assert split_gateway_uri(gateway_uri("fs", "file:///a/b")) == ("fs", "file:///a/b")


@pytest.mark.parametrize(
    "uri",
    [
        "demo://resource/static/document/architecture.md",  # not prefixed
        "agentcards://everything",  # no inner URI
        "agentcards://every:thing/demo://x",  # not a server name
        "agentcards:///demo://x",
        "ui://app.html",  # a UI with no server
        "ui://every:thing/app.html",
    ],
)
def test_anything_else_is_refused_naming_the_form(uri: str) -> None:
    with pytest.raises(ValidationFailed, match="agentcards://<server>/"):
        split_gateway_uri(uri)


def test_an_apps_ui_is_named_under_its_server_in_the_ui_scheme() -> None:
    assert gateway_uri("weather", "ui://dashboard/app.html", apps=True) == (
        "ui://weather/dashboard/app.html"
    )
    assert split_gateway_uri("ui://weather/dashboard/app.html") == (
        "weather",
        "ui://dashboard/app.html",
    )
    assert split_gateway_uri("ui://weather/dashboard") == ("weather", "ui://dashboard")
    # A client without Apps, and any other scheme: the agentcards:// name.
    assert gateway_uri("weather", "ui://dashboard", apps=False) == (
        "agentcards://weather/ui://dashboard"
    )
    assert gateway_uri("fs", "file:///a", apps=True) == "agentcards://fs/file:///a"


def test_a_tool_s_ui_is_renamed_on_the_aggregate_only() -> None:
    meta = {"ui": {"resourceUri": "ui://dash/app.html", "visibility": ["app"]}}
    meta["ui/resourceUri"] = "ui://dash/app.html"
    assert listed_meta(meta, "w", aggregate=False) == meta
    assert listed_meta(meta, "w", aggregate=True) == {
        "ui": {"resourceUri": "ui://w/dash/app.html", "visibility": ["app"]},
        "ui/resourceUri": "ui://w/dash/app.html",
    }
    assert meta["ui"]["resourceUri"] == "ui://dash/app.html"  # the server's own is kept
