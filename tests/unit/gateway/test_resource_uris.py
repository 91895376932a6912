"""The gateway's MCP names for downstream resources: agentcards://<server>/<the server's URI>."""

from __future__ import annotations

import pytest

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
    ],
)
def test_anything_else_is_refused_naming_the_form(uri: str) -> None:
    with pytest.raises(ValidationFailed, match="agentcards://<server>/"):
        split_gateway_uri(uri)
