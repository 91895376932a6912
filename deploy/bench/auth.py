"""Benchmark of a person's access token (docs/identity.md): what the auth gate costs per request.

The gate (``services.gateway.auth.AuthGate``) runs in process around an app that answers at
once, so each figure is the gate alone, in the same run: no credential checked at all (auth
off), a JWT checked in full on every request (signature, claims, identity mapping; ES256 as
oidc-provider signs, and RS256) beside an API key (cached, as usual), the same token answered from the checked-token cache, and a
DPoP-bound token with a fresh proof per request. The issuer's metadata and keys are served
from memory, so no figure includes the network (the keys are fetched once, then cached).
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable, MutableMapping
from types import SimpleNamespace
from typing import Any

import anyio
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

from services.gateway.auth import AuthGate
from services.gateway.oauth import ResourceServer
from shared.auth.cache import PrincipalCache
from shared.auth.keys import hash_key, new_key
from shared.auth.principal import Principal
from shared.auth.tokens import TokenVerifier
from shared.config import Settings

ISSUER = "https://idp.bench.example"
PUBLIC_URL = "https://gateway.bench.example"
RESOURCE = f"{PUBLIC_URL}/mcp"
API_KEY = new_key()


class _Issuer:
    def __init__(self) -> None:
        self.keys = KeySet(
            [
                ECKey.generate_key("P-256", parameters={"kid": "es", "alg": "ES256"}),
                RSAKey.generate_key(2048, parameters={"kid": "rs", "alg": "RS256"}),
            ]
        )

    def fetch(self, url: str, **_: Any) -> dict[str, Any]:
        if url.endswith("/jwks"):
            return dict(self.keys.as_dict(private=False))
        return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks",
                "id_token_signing_alg_values_supported": ["ES256", "RS256"]}  # fmt: skip

    def token(self, alg: str, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": RESOURCE, "sub": "bench-user", "iat": now,
                "exp": now + 3600, "scope": "agentcards:read", "org": "bench",
                "groups": ["bench"]} | claims  # fmt: skip
        kid = "es" if alg == "ES256" else "rs"
        return jwt.encode({"alg": alg, "kid": kid, "typ": "at+jwt"}, body, self.keys)


class _Seen:
    """A Redis stand-in for DPoP's jti check (SET NX): the bench times the proof, not Redis."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def set(self, name: str, value: object, *, nx: bool, ex: int) -> bool:
        if name in self.keys:
            return False
        self.keys.add(name)
        return True


def _gate(*, auth: bool, cache_s: float, issuer: _Issuer) -> tuple[AuthGate, dict[str, Any]]:
    settings = Settings(
        env="test",
        auth=auth,
        oauth_issuer=ISSUER,
        public_url=PUBLIC_URL,
        oauth_token_cache_s=cache_s,
    )
    verifier = TokenVerifier(issuer=ISSUER, resource=RESOURCE, cache_s=cache_s, fetch=issuer.fetch)
    resource = ResourceServer(settings, verifier=verifier)
    resource.identity = resource.identity.model_validate(
        {"default_tenant": "bench", "groups": {"bench": {"scopes": ["agentcards:read"]}}}
    )

    async def answer(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    keys = PrincipalCache(ttl_s=3600)
    keys._principals[hash_key(API_KEY)] = (float("inf"), Principal(tenant_id="bench", key_id="k"))
    state = SimpleNamespace(redis=_Seen(), auth=keys, settings=settings)
    app = SimpleNamespace(state=SimpleNamespace(gateway=state))
    return AuthGate(answer, settings=settings, resource=resource), {"app": app}


async def _p50(
    gate: AuthGate, base: dict[str, Any], headers: Callable[[], list[Any]], n: int
) -> dict[str, float]:
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    times = []
    for i in range(n + 20):
        scope = {"type": "http", "method": "GET", "path": "/v1/executions", "headers": headers(),
                 "client": ("10.0.0.1", 1), **base}  # fmt: skip
        started = time.perf_counter()
        await gate(scope, receive, send)
        if i >= 20:  # the first requests fetch the keys and warm the caches
            times.append((time.perf_counter() - started) * 1e6)
    assert set(statuses) == {200}, f"the gate refused the bench's requests: {set(statuses)}"
    times.sort()
    return {
        "p50_us": round(statistics.median(times), 1),
        "p90_us": round(times[int(len(times) * 0.9)], 1),
    }


def run(n: int = 2000) -> dict[str, Any]:
    """p50/p90 of the gate per request: no check, JWT (ES256, RS256) cold and cached, DPoP."""
    issuer = _Issuer()
    es, rs = issuer.token("ES256"), issuer.token("RS256")
    key = ECKey.generate_key("P-256")
    bound = issuer.token("ES256", cnf={"jkt": key.thumbprint()})

    def proof() -> str:
        import base64
        import hashlib

        ath = base64.urlsafe_b64encode(hashlib.sha256(bound.encode()).digest()).rstrip(b"=")
        body = {"htm": "GET", "htu": f"{PUBLIC_URL}/v1/executions", "iat": int(time.time()),
                "jti": uuid.uuid4().hex, "ath": ath.decode()}  # fmt: skip
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.as_dict(private=False)}
        return jwt.encode(header, body, key)

    def bearer(token: str) -> Callable[[], list[Any]]:
        return lambda: [(b"authorization", f"Bearer {token}".encode())]

    async def measure() -> dict[str, Any]:
        off, off_base = _gate(auth=False, cache_s=0, issuer=issuer)
        cold, cold_base = _gate(auth=True, cache_s=0, issuer=issuer)
        warm, warm_base = _gate(auth=True, cache_s=30, issuer=issuer)
        return {
            "no_token_auth_off": await _p50(off, off_base, lambda: [], n),
            "api_key_cached": await _p50(cold, cold_base, bearer(API_KEY), n),
            "jwt_es256_checked_every_request": await _p50(cold, cold_base, bearer(es), n),
            "jwt_rs256_checked_every_request": await _p50(cold, cold_base, bearer(rs), n),
            "jwt_es256_from_token_cache": await _p50(warm, warm_base, bearer(es), n),
            "dpop_es256_with_fresh_proof": await _p50(
                cold,
                cold_base,
                lambda: [(b"authorization", f"DPoP {bound}".encode()), (b"dpop", proof().encode())],
                n,
            ),
        }

    results = anyio.run(measure)
    base = results["no_token_auth_off"]["p50_us"]
    return {
        "benchmark": "auth",
        "n": n,
        "per_request": results,
        "added_p50_us": {k: round(v["p50_us"] - base, 1) for k, v in results.items()},
        "note": "the auth gate alone, in process; the issuer's keys served from memory",
    }
