"""The gateway's OAuth client ID metadata document: the client metadata an authorization
server fetches from the URL the gateway gives as its ``client_id``, instead of a registration
(MCP authorization 2025-11-25 and 2026-07-28, "Client ID Metadata Documents";
draft-ietf-oauth-client-id-metadata-document).

The document is served at ``<public_url>/oauth/client-metadata.json``
(services/gateway/connect.py) and names that URL as its ``client_id``, the gateway's callback
as its only redirect URI, and no client secret (``token_endpoint_auth_method: none``: the
code is bound to its PKCE verifier). An authorization server fetches it over HTTPS only, so
a gateway whose public URL is ``http`` offers none (``usable_url`` is None) and registers.
"""

from __future__ import annotations

from typing import Any

from mcp.client.auth.utils import is_valid_client_metadata_url
from mcp.shared.auth import OAuthClientMetadata

DOCUMENT_PATH = "/oauth/client-metadata.json"
CALLBACK_PATH = "/oauth/callback"
CLIENT_NAME = "AgentCards gateway"


def document_url(public_url: str) -> str:
    """Where the gateway publishes its document (and so its client_id when it is used)."""
    return public_url.rstrip("/") + DOCUMENT_PATH


def callback_url(public_url: str) -> str:
    """The gateway's OAuth redirect URI."""
    return public_url.rstrip("/") + CALLBACK_PATH


def usable_url(public_url: str | None) -> str | None:
    """The document's URL when an authorization server can take it as a client_id (https,
    with a path: the SDK's ``is_valid_client_metadata_url``); else None (register instead)."""
    if not public_url:
        return None
    url = document_url(public_url)
    return url if is_valid_client_metadata_url(url) else None


def document(public_url: str) -> dict[str, Any]:
    """The document itself: RFC 7591 client metadata plus the ``client_id``, which must be
    the URL it is served at, exactly."""
    metadata = OAuthClientMetadata(
        redirect_uris=[callback_url(public_url)],  # type: ignore[list-item]  # parsed by pydantic
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        client_name=CLIENT_NAME,
        client_uri=public_url.rstrip("/"),  # type: ignore[arg-type]  # parsed by pydantic
        application_type="web",  # a server with an https redirect URI, not a native app
    )
    return {"client_id": document_url(public_url),
            **metadata.model_dump(mode="json", exclude_none=True)}  # fmt: skip
