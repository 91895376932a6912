"""How the gateway's client authenticates at an upstream token endpoint: as it was registered
(RFC 7591's ``token_endpoint_auth_method``), else as the authorization server takes a secret;
a connection stored before the method was kept reads as basic with a secret."""

from __future__ import annotations

from mcp.shared.auth import OAuthMetadata

from shared.connections.oauth import Client


def _metadata(*methods: str) -> OAuthMetadata:
    return OAuthMetadata.model_validate({
        "issuer": "https://as.example", "authorization_endpoint": "https://as.example/authorize",
        "token_endpoint": "https://as.example/token", "response_types_supported": ["code"],
        "token_endpoint_auth_methods_supported": list(methods) or None,
    })  # fmt: skip


def test_the_registered_method_is_used() -> None:
    both = _metadata("client_secret_basic", "client_secret_post")
    assert Client.at(both, "c", "s", "client_secret_post").auth_method == "client_secret_post"
    assert Client.at(both, "c", "s", "client_secret_basic").auth_method == "client_secret_basic"
    assert Client.at(both, "c", None, "none").auth_method == "none"


def test_without_a_registered_method_the_servers_own_decides() -> None:
    assert Client.at(_metadata("client_secret_post"), "c", "s").auth_method == (
        "client_secret_post"
    )
    assert Client.at(_metadata(), "c", "s").auth_method == "client_secret_basic"
    assert Client.at(_metadata(), "c", None).auth_method == "none"
    # A method named without the secret it needs, or one we do not speak: not taken.
    assert Client.at(_metadata(), "c", None, "client_secret_post").auth_method == "none"
    assert Client.at(_metadata(), "c", "s", "private_key_jwt").auth_method == (
        "client_secret_basic"
    )


def test_a_stored_connection_authenticates_as_stored() -> None:
    assert Client.stored("c", "s", "client_secret_post").auth_method == "client_secret_post"
    assert Client.stored("c", "s", None).auth_method == "client_secret_basic"  # an older row
    assert Client.stored("c", None, None).auth_method == "none"
