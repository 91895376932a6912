"""Access token checks (shared.auth.tokens) against an issuer whose documents a dict serves."""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

from shared.auth.tokens import KeyCache, TokenVerifier
from shared.errors import Unauthorized

ISSUER = "https://idp.example.com"
RESOURCE = "https://gateway.example.com/mcp"
JWKS_URI = f"{ISSUER}/jwks"


class Issuer:
    """The issuer's metadata and JWKS, served to the verifier's ``fetch``; counts JWKS fetches."""

    def __init__(self) -> None:
        self.keys = KeySet([ECKey.generate_key("P-256", parameters={"kid": "k1", "alg": "ES256"})])
        self.down = False
        self.jwks_fetches = 0

    def fetch(self, url: str, **_: Any) -> dict[str, Any]:
        if self.down:
            raise httpx.ConnectError("the issuer is down")
        if url == JWKS_URI:
            self.jwks_fetches += 1
            return self.keys.as_dict(private=False)
        if url == f"{ISSUER}/.well-known/openid-configuration":
            return {"issuer": ISSUER, "jwks_uri": JWKS_URI,
                    "id_token_signing_alg_values_supported": ["ES256"]}  # fmt: skip
        raise httpx.HTTPStatusError(
            "404", request=httpx.Request("GET", url), response=httpx.Response(404)
        )

    def token(self, *, keys: KeySet | None = None, header: dict[str, Any] | None = None,
              **claims: Any) -> str:  # fmt: skip
        now = int(time.time())
        body = {"iss": ISSUER, "aud": RESOURCE, "sub": "alice", "iat": now, "exp": now + 300,
                "scope": "agentcards:read"} | claims  # fmt: skip
        body = {k: v for k, v in body.items() if v is not None}
        header = header or {"alg": "ES256", "kid": "k1"}
        if keys is None and header["kid"] not in {k.kid for k in self.keys.keys}:
            keys = KeySet([ECKey.generate_key("P-256", parameters={"kid": header["kid"]})])
        return jwt.encode(header, body, keys or self.keys)


@pytest.fixture
def issuer() -> Issuer:
    return Issuer()


def verifier(issuer: Issuer, **options: Any) -> TokenVerifier:
    return TokenVerifier(issuer=ISSUER, resource=RESOURCE, fetch=issuer.fetch, cache_s=0, **options)


def test_a_good_token_names_its_user_and_scopes(issuer: Issuer) -> None:
    checked = verifier(issuer).check(issuer.token(scope="agentcards:read agentcards:execute"))
    assert checked.claims.subject == "alice"
    assert checked.claims.scopes == {"agentcards:read", "agentcards:execute"}
    assert checked.jkt is None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(issuer: Issuer) -> str:
    header = _b64(b'{"alg":"none","kid":"k1"}')
    body = issuer.token().split(".")[1]
    return f"{header}.{body}."


def _hmac_with_public_key(issuer: Issuer) -> str:
    public = issuer.keys.keys[0].as_dict(private=False)
    secret = KeySet.import_key_set({"keys": [{"kty": "oct", "kid": "k1",
                                              "k": _b64(str(public).encode())}]})  # fmt: skip
    return issuer.token(keys=secret, header={"alg": "HS256", "kid": "k1"})


def _tampered(issuer: Issuer) -> str:
    header, _, signature = issuer.token().split(".")
    body = _b64(
        b'{"iss":"%s","aud":"%s","sub":"mallory","exp":9999999999}'
        % (ISSUER.encode(), RESOURCE.encode())
    )
    return f"{header}.{body}.{signature}"


def _other_idp(issuer: Issuer) -> str:
    other = KeySet([RSAKey.generate_key(2048, parameters={"kid": "theirs", "alg": "RS256"})])
    return issuer.token(keys=other, header={"alg": "RS256", "kid": "theirs"},
                        iss="https://other-idp.example.com")  # fmt: skip


REFUSALS = {
    "expired": (lambda i: i.token(exp=int(time.time()) - 120), "expired"),
    "not yet valid": (lambda i: i.token(nbf=int(time.time()) + 600), "not valid yet"),
    "wrong audience": (lambda i: i.token(aud="https://elsewhere.example.com/mcp"), "audience"),
    "wrong issuer": (lambda i: i.token(iss="https://evil.example.com"), "not from this issuer"),
    "alg none": (_unsigned, "'none'"),
    "HMAC with the public key": (_hmac_with_public_key, "'HS256'"),
    "tampered": (_tampered, "altered"),
    "unknown kid": (lambda i: i.token(header={"alg": "ES256", "kid": "k9"}), "unknown kid"),
    "another IdP's": (_other_idp, "unknown kid"),
    "no expiry": (lambda i: i.token(exp=None), "lacks a required claim"),
    "opaque, no introspection": (lambda i: "opaque-Zq3xW9vK2mP7", "cannot introspect"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_each_bad_token_is_refused_with_a_reason_naming_no_secret(
    issuer: Issuer, case: str
) -> None:
    make, reason = REFUSALS[case]
    token = make(issuer)
    with pytest.raises(Unauthorized) as refused:
        verifier(issuer).check(token)
    assert reason in refused.value.message
    assert token not in refused.value.message
    assert token.split(".")[0] not in refused.value.message


def test_a_flood_of_unknown_kids_fetches_the_keys_once_per_interval(issuer: Issuer) -> None:
    check = verifier(issuer, jwks_refresh_s=30)
    check.check(issuer.token())  # keys fetched once
    for n in range(200):
        with pytest.raises(Unauthorized):
            check.check(issuer.token(header={"alg": "ES256", "kid": f"forged-{n}"}))
    assert issuer.jwks_fetches == 1  # all within the interval of the first fetch: none more


def test_a_rotated_key_is_picked_up_without_a_restart(issuer: Issuer) -> None:
    now = [0.0]
    keys = KeyCache(jwks_uri=JWKS_URI, fetch=issuer.fetch, min_interval_s=30, clock=lambda: now[0])
    check = verifier(issuer)
    check.metadata()
    check.keys = keys
    check.check(issuer.token())
    issuer.keys = KeySet([ECKey.generate_key("P-256", parameters={"kid": "k2", "alg": "ES256"})])
    now[0] = 31.0  # the refresh interval has passed since the last fetch
    assert check.check(issuer.token(header={"alg": "ES256", "kid": "k2"})).claims.subject == "alice"


def test_an_outage_keeps_cached_keys_working_and_refuses_unknown_ones(issuer: Issuer) -> None:
    check = verifier(issuer, jwks_refresh_s=0.001)
    check.check(issuer.token())
    issuer.down = True
    time.sleep(0.01)
    assert check.check(issuer.token()).claims.subject == "alice"
    with pytest.raises(Unauthorized, match="unknown kid"):
        check.check(issuer.token(header={"alg": "ES256", "kid": "new"}))


def test_an_unreachable_issuer_refuses_every_token(issuer: Issuer) -> None:
    issuer.down = True
    with pytest.raises(Unauthorized, match="metadata cannot be fetched"):
        verifier(issuer).check(issuer.token())


def test_a_checked_token_is_answered_from_memory_until_the_cache_time(issuer: Issuer) -> None:
    check = TokenVerifier(issuer=ISSUER, resource=RESOURCE, fetch=issuer.fetch, cache_s=30)
    token = issuer.token()
    check.check(token)
    issuer.down = True
    assert check.quick(token) is not None


def test_a_dpop_bound_token_says_its_key(issuer: Issuer) -> None:
    checked = verifier(issuer).check(issuer.token(cnf={"jkt": "thumb"}))
    assert checked.jkt == "thumb"
