"""The gateway as an OAuth 2.1 protected resource (MCP authorization; RFC 9728, 8707, 9449).

With ``AGENTCARDS_OAUTH_ISSUER`` set, a request's ``Authorization`` carries either an API key
(``Bearer ack_…``, as without an issuer) or a person's access token from that issuer
(``Bearer <token>``, or ``DPoP <token>`` with a ``DPoP`` proof for a sender-constrained
one). The token's claims become a principal through the identity file
(``shared.auth.identity``). A request without a usable credential is answered 401 with
``WWW-Authenticate: Bearer resource_metadata="…"``, which MCP clients follow to this
module's metadata document and from there to the issuer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import redis
from anyio import to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from shared.auth.dpop import check_proof
from shared.auth.identity import IdentityConfig, load_identity, principal_for
from shared.auth.keys import looks_like_key
from shared.auth.principal import SCOPES, Principal
from shared.auth.subject import seal_subject
from shared.auth.tokens import ASYMMETRIC_ALGS, CheckedToken, TokenVerifier
from shared.config import Settings
from shared.errors import DependencyError, Unauthorized
from shared.privacy.keys import PiiKeys
from shared.queues import DPOP_JTI_PREFIX

WELL_KNOWN = "/.well-known/oauth-protected-resource"


class ResourceServer:
    """Turns a request's access token into its principal (or refuses it, saying why)."""

    def __init__(self, settings: Settings, *, verifier: TokenVerifier | None = None) -> None:
        assert settings.oauth_issuer and settings.public_url
        self.settings = settings
        self.public_url = settings.public_url.rstrip("/")
        self.identity: IdentityConfig = load_identity(settings.identity_config)
        self.keys = PiiKeys.from_settings(settings)  # seals the token for the toolhost
        secret = settings.oauth_client_secret
        self.verifier = verifier or TokenVerifier(
            issuer=settings.oauth_issuer,
            resource=settings.resource_url,
            leeway_s=settings.oauth_leeway_s,
            jwks_refresh_s=settings.oauth_jwks_refresh_s,
            cache_s=settings.oauth_token_cache_s,
            client_id=settings.oauth_client_id,
            client_secret=secret.get_secret_value() if secret else None,
        )

    async def principal(
        self,
        *,
        scheme: str,
        token: str,
        proof: str | None,
        method: str,
        path: str,
        redis_client: redis.Redis,
    ) -> Principal:
        """The principal of a person's token; Unauthorized for a bad token or a bad binding."""
        checked = self.verifier.quick(token)
        if checked is None:
            checked = await to_thread.run_sync(self.verifier.check, token)
        if checked.jkt is None:
            if scheme != "bearer":
                raise Unauthorized("the `DPoP` scheme is for DPoP-bound tokens; this one is not")
        elif scheme != "dpop":
            raise Unauthorized(
                "this token is DPoP-bound: a plain bearer token is refused; send "
                "`Authorization: DPoP <token>` with a `DPoP` proof"
            )
        else:
            await self._check_binding(
                checked, token=token, proof=proof, method=method, path=path, client=redis_client
            )
        principal = principal_for(self.identity, checked.claims)
        if principal.user is None:
            return principal
        sealed = seal_subject(
            self.keys, tenant_id=principal.tenant_id, user=principal.user, token=token
        )
        return replace(principal, subject_token=sealed)

    async def _check_binding(
        self,
        checked: CheckedToken,
        *,
        token: str,
        proof: str | None,
        method: str,
        path: str,
        client: redis.Redis,
    ) -> None:
        def first_use(digest: str, ttl_s: int) -> bool:
            try:
                return bool(client.set(DPOP_JTI_PREFIX + digest, 1, nx=True, ex=ttl_s))
            except redis.RedisError as exc:  # fail closed: a replay cannot be ruled out
                raise DependencyError(f"cannot check the DPoP proof's jti: Redis: {exc}") from exc

        assert checked.jkt is not None
        jkt = checked.jkt
        await to_thread.run_sync(
            lambda: check_proof(
                proof,
                method=method,
                url=self.public_url + path,
                access_token=token,
                jkt=jkt,
                first_use=first_use,
            )
        )

    def metadata_url(self, path: str) -> str:
        """Where the metadata of the resource serving ``path`` lives (RFC 9728 §3.1)."""
        resource_path = path if path == "/mcp" or path.startswith("/mcp/") else "/mcp"
        return f"{self.public_url}{WELL_KNOWN}{resource_path}"

    def challenge(self, path: str, *, error: str | None = None, scope: str | None = None) -> str:
        """The ``WWW-Authenticate`` value of a refusal (RFC 6750 §3, RFC 9728 §5.1)."""
        parts = [f'resource_metadata="{self.metadata_url(path)}"']
        if error:
            parts.insert(0, f'error="{error}"')
        if scope:
            parts.append(f'scope="{scope}"')
        return "Bearer " + ", ".join(parts)

    def document(self) -> dict[str, Any]:
        """The protected resource metadata (RFC 9728 §2) of the gateway: one resource."""
        return {
            "resource": self.settings.resource_url,
            "authorization_servers": [self.settings.oauth_issuer],
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "dpop_signing_alg_values_supported": sorted(ASYMMETRIC_ALGS),
            "resource_name": "AgentCards",
            "resource_documentation": f"{self.public_url}/docs",
        }

    def routes(self) -> list[BaseRoute]:
        """The metadata document at every path a client may derive from a resource URL."""

        async def metadata(request: Request) -> Response:
            return JSONResponse(self.document(), headers={"Cache-Control": "max-age=300"})

        return [
            Route(WELL_KNOWN, metadata, methods=["GET"], include_in_schema=False),
            Route(WELL_KNOWN + "/mcp", metadata, methods=["GET"], include_in_schema=False),
            Route(WELL_KNOWN + "/mcp/{rest:path}", metadata, methods=["GET"],
                  include_in_schema=False),
            Route(WELL_KNOWN + "/v1", metadata, methods=["GET"], include_in_schema=False),
        ]  # fmt: skip


def credential(headers: list[tuple[bytes, bytes]]) -> tuple[str, str, str | None] | None:
    """``(scheme, token, dpop proof)`` of the request's one ``Authorization`` header; None
    without one. Two headers, or a key sent as a DPoP token, mix credentials: refused."""
    found = [v for n, v in headers if n == b"authorization"]
    proofs = [v for n, v in headers if n == b"dpop"]
    if not found:
        return None
    if len(found) > 1 or len(proofs) > 1:
        raise Unauthorized("send one credential: one Authorization header (and at most one DPoP)")
    scheme, _, token = found[0].decode("latin-1").strip().partition(" ")
    scheme, token = scheme.lower(), token.strip()
    if scheme not in {"bearer", "dpop"} or not token:
        raise Unauthorized(
            "the Authorization header must be `Bearer <token or key>` or `DPoP <token>`"
        )
    if scheme == "dpop" and looks_like_key(token):
        raise Unauthorized("an API key is sent as `Bearer <key>`, never as a DPoP token")
    return scheme, token, proofs[0].decode("latin-1") if proofs else None


def is_key(scheme: str, token: str, proof: str | None) -> bool:
    """Whether the credential is an API key (a key and a DPoP proof together are refused)."""
    if scheme != "bearer" or not looks_like_key(token):
        return False
    if proof is not None:
        raise Unauthorized("an API key takes no DPoP proof: send one credential")
    return True
