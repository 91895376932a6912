"""Which client the gateway is at an upstream authorization server: its client ID metadata
document's URL when the authorization server takes those and the gateway's public URL is
https (no registration, no secret), else a dynamic registration; and the document itself."""

from __future__ import annotations

import pytest
from mcp.shared.auth import OAuthMetadata

from shared.connections.metadata_document import document, usable_url
from shared.connections.oauth import Client, ConnectFailed, Discovered, client_at

PUBLIC = "https://gateway.example.com"
DOCUMENT = "https://gateway.example.com/oauth/client-metadata.json"
REDIRECT = "https://gateway.example.com/oauth/callback"


def _found(*, documents: bool | None) -> Discovered:
    """An authorization server without a registration endpoint: reaching registration fails
    at once, naming why, and nothing is fetched."""
    metadata = OAuthMetadata.model_validate({
        "issuer": "https://as.example", "authorization_endpoint": "https://as.example/authorize",
        "token_endpoint": "https://as.example/token", "response_types_supported": ["code"],
        "client_id_metadata_document_supported": documents,
    })  # fmt: skip
    return Discovered("https://mcp.example/mcp", metadata, [])


def test_only_an_https_public_url_offers_a_document() -> None:
    assert usable_url(PUBLIC) == DOCUMENT
    assert usable_url(PUBLIC + "/") == DOCUMENT
    under_a_path = "https://example.com/gw/oauth/client-metadata.json"
    assert usable_url("https://example.com/gw/") == under_a_path
    assert usable_url("http://127.0.0.1:8000") is None  # authorization servers fetch https only
    assert usable_url(None) is None


def test_the_document_names_its_own_url_and_the_callback() -> None:
    served = document(PUBLIC + "/")
    assert served["client_id"] == DOCUMENT  # exactly the URL it is served at
    assert served["redirect_uris"] == [REDIRECT]
    assert served["token_endpoint_auth_method"] == "none"  # no secret: PKCE binds the code
    assert served["grant_types"] == ["authorization_code", "refresh_token"]
    assert served["response_types"] == ["code"]
    assert served["client_name"] and "client_secret" not in served


async def test_the_document_url_is_the_client_where_the_authorization_server_takes_it() -> None:
    client = await client_at(_found(documents=True), redirect_uri=REDIRECT, metadata_url=DOCUMENT)
    assert client == Client(DOCUMENT, None, "none")


@pytest.mark.parametrize("documents", [False, None])
async def test_an_authorization_server_without_documents_gets_a_registration(
    documents: bool | None,
) -> None:
    with pytest.raises(ConnectFailed, match=r"takes no dynamic client registration$"):
        await client_at(_found(documents=documents), redirect_uri=REDIRECT, metadata_url=DOCUMENT)


async def test_an_http_gateway_registers_and_says_a_document_needs_https() -> None:
    offered = usable_url("http://127.0.0.1:8000")
    with pytest.raises(ConnectFailed, match=r"offers only when its public URL.*is https"):
        await client_at(_found(documents=True), redirect_uri=REDIRECT, metadata_url=offered)
