"""People's access tokens: JWTs checked against the issuer's JWKS, opaque ones by introspection.

All JOSE work is joserfc's. A JWT is accepted when it is signed with one of the issuer's
asymmetric algorithms by a key the issuer publishes, names the configured issuer and this
gateway (``<public_url>/mcp``, RFC 8707) as its audience, and is within ``exp``/``nbf``
(with a small leeway). Anything else is an ``Unauthorized`` whose message says why and
never repeats the token.

The issuer's keys (``KeyCache``) are fetched on first use, refreshed when a token names a
key not seen yet (a rotation), at most once per ``min_interval_s`` however many unknown
``kid``s arrive, and when older than ``max_age_s``. A failed fetch keeps the keys already
held: tokens they signed keep working, tokens signed by any other key are refused.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jws, jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from shared.auth.identity import Claims
from shared.errors import Unauthorized

# Only signatures that need the issuer's private key: never `none`, never HMAC (whose
# "secret" would be the public key anyone can fetch).
ASYMMETRIC_ALGS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
FETCH_TIMEOUT_S = 5.0
KEYS_MAX_AGE_S = 600.0
# Checked tokens remembered (by sha256), so a busy client's repeated token costs a lookup.
TOKEN_CACHE_SIZE = 4096

Fetch = Callable[..., dict[str, Any]]


def http_fetch(url: str, *, data: dict[str, str] | None = None, auth: Any = None) -> dict[str, Any]:
    """GET (or POST ``data``) a JSON document from the issuer."""
    with httpx.Client(timeout=FETCH_TIMEOUT_S, follow_redirects=False) as client:
        if data is None:
            response = client.get(url, headers={"Accept": "application/json"})
        else:
            response = client.post(url, data=data, auth=auth)
        response.raise_for_status()
        body = response.json()
    if not isinstance(body, dict):
        raise ValueError(f"{url} did not answer a JSON object")
    return body


@dataclass(frozen=True, slots=True)
class IssuerMetadata:
    """What the gateway reads of the issuer's metadata (OpenID discovery or RFC 8414)."""

    issuer: str
    jwks_uri: str | None
    introspection_endpoint: str | None
    algorithms: frozenset[str]
    # Where the dashboard signs people in and out (authorization code + PKCE; RP logout).
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    end_session_endpoint: str | None = None


def discover(issuer: str, *, fetch: Fetch = http_fetch) -> IssuerMetadata:
    """The issuer's metadata: OpenID discovery, else RFC 8414; its ``issuer`` must match."""
    base = issuer.rstrip("/")
    scheme, _, rest = base.partition("://")
    host, _, path = rest.partition("/")
    urls = [
        f"{base}/.well-known/openid-configuration",
        f"{scheme}://{host}/.well-known/oauth-authorization-server" + (f"/{path}" if path else ""),
    ]
    errors = []
    for url in urls:
        try:
            meta = fetch(url)
        except (httpx.HTTPError, ValueError) as exc:
            errors.append(f"{url}: {exc}")
            continue
        if str(meta.get("issuer", "")).rstrip("/") != base:
            raise ValueError(f"{url} names issuer {meta.get('issuer')!r}, not {issuer!r}")
        algs = set(meta.get("id_token_signing_alg_values_supported") or ())
        algs |= set(meta.get("introspection_signing_alg_values_supported") or ())
        return IssuerMetadata(
            issuer=str(meta["issuer"]),
            jwks_uri=meta.get("jwks_uri"),
            introspection_endpoint=meta.get("introspection_endpoint"),
            algorithms=frozenset(algs) & ASYMMETRIC_ALGS,
            authorization_endpoint=meta.get("authorization_endpoint"),
            token_endpoint=meta.get("token_endpoint"),
            end_session_endpoint=meta.get("end_session_endpoint"),
        )
    raise ValueError("; ".join(errors))


class KeyCache:
    """The issuer's signing keys, refreshed on an unknown ``kid`` at a bounded rate (module doc)."""

    def __init__(
        self,
        *,
        jwks_uri: str,
        fetch: Fetch = http_fetch,
        min_interval_s: float = 30.0,
        max_age_s: float = KEYS_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jwks_uri = jwks_uri
        self.fetch = fetch
        self.min_interval_s = min_interval_s
        self.max_age_s = max_age_s
        self.clock = clock
        self.fetches = 0  # how many times the issuer was asked (for tests and the bench)
        self._lock = threading.Lock()
        self._keys: KeySet | None = None
        self._kids: frozenset[str | None] = frozenset()
        self._fetched_at = float("-inf")
        self._tried_at = float("-inf")

    def cached(self, kid: str | None) -> KeySet | None:
        """The keys when ``kid`` is among them and they are fresh; None when a fetch may be due."""
        keys = self._keys
        if (
            keys is not None
            and kid in self._kids
            and self.clock() - self._fetched_at < self.max_age_s
        ):
            return keys
        return None

    def keys_for(self, kid: str | None) -> KeySet:
        """The keys, holding ``kid``; Unauthorized when the issuer does not publish it."""
        found = self.cached(kid)
        if found is not None:
            return found
        with self._lock:
            now = self.clock()
            stale = now - self._fetched_at >= self.max_age_s
            if (kid not in self._kids or stale) and now - self._tried_at >= self.min_interval_s:
                self._tried_at = now
                self._refresh()
            if self._keys is None:
                raise Unauthorized(
                    "the issuer's signing keys cannot be fetched; retry later, or ask the "
                    "operator to check AGENTCARDS_OAUTH_ISSUER"
                )
            if kid not in self._kids:
                raise Unauthorized(
                    "the token is signed with a key the issuer does not publish (unknown kid): "
                    "it is from another issuer, or forged"
                )
            return self._keys

    def _refresh(self) -> None:
        """Fetch the JWKS; on failure keep what is held (fail closed for keys not held)."""
        self.fetches += 1
        try:
            document = self.fetch(self.jwks_uri)
            keys = KeySet.import_key_set(
                {"keys": [k for k in document.get("keys", []) if k.get("use", "sig") == "sig"]}
            )
        except (httpx.HTTPError, ValueError, JoseError, TypeError):
            return
        self._keys = keys
        self._kids = frozenset(k.kid for k in keys.keys)
        self._fetched_at = self.clock()


@dataclass(frozen=True, slots=True)
class CheckedToken:
    """A token the issuer vouches for: its bearer's claims, and its DPoP key's thumbprint."""

    claims: Claims
    jkt: str | None  # ``cnf.jkt``: the token is bound to this DPoP key (RFC 9449)
    expires_at: float | None  # epoch seconds


class TokenVerifier:
    """Checks the configured issuer's access tokens for this resource (see the module doc)."""

    def __init__(
        self,
        *,
        issuer: str,
        resource: str,
        leeway_s: int = 30,
        jwks_refresh_s: float = 30.0,
        cache_s: float = 30.0,
        client_id: str | None = None,
        client_secret: str | None = None,
        fetch: Fetch = http_fetch,
    ) -> None:
        self.issuer = issuer
        self.resource = resource
        self.leeway_s = leeway_s
        self.jwks_refresh_s = jwks_refresh_s
        self.cache_s = cache_s
        self.client = (client_id, client_secret) if client_id else None
        self.fetch = fetch
        self.keys: KeyCache | None = None
        self._meta: IssuerMetadata | None = None
        self._meta_tried = float("-inf")
        self._lock = threading.Lock()
        self._checked: OrderedDict[str, tuple[float, CheckedToken]] = OrderedDict()

    def cached(self, token: str) -> CheckedToken | None:
        """A recent answer for ``token`` (by its hash), or None when it must be checked."""
        entry = self._checked.get(_digest(token))
        if entry is None or entry[0] <= time.time():
            return None
        return entry[1]

    def quick(self, token: str) -> CheckedToken | None:
        """The answer without any I/O when possible (cached, or a JWT whose key is held)."""
        found = self.cached(token)
        if found is not None or self.keys is None or self._meta is None or token.count(".") != 2:
            return found
        try:
            kid = jws.extract_compact(token.encode()).protected.get("kid")
        except JoseError:
            return None
        keys = self.keys.cached(kid)
        return None if keys is None else self._remember(token, self._check_jwt(token, keys))

    def check(self, token: str) -> CheckedToken:
        """The token's bearer and binding, or Unauthorized saying why not (may fetch: blocking)."""
        found = self.cached(token)
        if found is not None:
            return found
        meta = self.metadata()
        if token.count(".") == 2:
            if self.keys is None:
                raise Unauthorized("the issuer publishes no signing keys (no jwks_uri)")
            kid = _header(token).get("kid")
            return self._remember(token, self._check_jwt(token, self.keys.keys_for(kid)))
        return self._remember(token, self._introspect(token, meta))

    def metadata(self) -> IssuerMetadata:
        """The issuer's metadata, fetched once (retried at most every ``jwks_refresh_s``)."""
        if self._meta is not None:
            return self._meta
        with self._lock:
            if self._meta is None and time.monotonic() - self._meta_tried >= self.jwks_refresh_s:
                self._meta_tried = time.monotonic()
                try:
                    meta = discover(self.issuer, fetch=self.fetch)
                except ValueError:
                    meta = None
                if meta is not None:
                    if meta.jwks_uri:
                        self.keys = KeyCache(
                            jwks_uri=meta.jwks_uri,
                            fetch=self.fetch,
                            min_interval_s=self.jwks_refresh_s,
                        )
                    self._meta = meta
            if self._meta is None:
                raise Unauthorized(
                    "the issuer's metadata cannot be fetched, so no token can be checked; "
                    "retry later"
                )
            return self._meta

    def check_id_token(self, token: str, *, client_id: str, nonce: str) -> dict[str, Any]:
        """An ID token's claims (OpenID Connect Core 3.1.3.7): signed by the issuer's keys,
        for ``client_id``, with this sign-in's ``nonce``; Unauthorized saying why not."""
        self.metadata()
        if self.keys is None:
            raise Unauthorized("the issuer publishes no signing keys (no jwks_uri)")
        keys = self.keys.keys_for(_header(token).get("kid"))
        try:
            decoded = jwt.decode(token, keys, algorithms=self._algorithms())
        except JoseError as exc:
            raise Unauthorized(f"the ID token cannot be verified ({exc.error})") from None
        claims = dict(decoded.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=self.leeway_s,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": client_id},
            exp={"essential": True},
            sub={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise Unauthorized(f"the ID token is not for this sign-in ({exc.error})") from None
        return claims

    def _algorithms(self) -> list[str]:
        """The issuer's algorithms: those its metadata and its keys name, asymmetric only."""
        assert self._meta is not None
        algs = set(self._meta.algorithms)
        if self.keys is not None and self.keys._keys is not None:
            algs |= {k.alg for k in self.keys._keys.keys if k.alg} & ASYMMETRIC_ALGS
        return sorted(algs)

    def _check_jwt(self, token: str, keys: KeySet) -> CheckedToken:
        algorithms = self._algorithms()
        alg = _header(token).get("alg")
        if alg not in algorithms:
            raise Unauthorized(
                f"the token is signed with {alg!r}, not one of the issuer's algorithms "
                f"({', '.join(algorithms)})"
            )
        try:
            decoded = jwt.decode(token, keys, algorithms=algorithms)
        except BadSignatureError:
            raise Unauthorized("the token's signature does not verify: it was altered") from None
        except JoseError as exc:
            raise Unauthorized(f"the token cannot be verified ({exc.error})") from None
        claims = dict(decoded.claims)
        self._check_claims(claims)
        return _checked(claims)

    def _check_claims(self, claims: dict[str, Any]) -> None:
        registry = jwt.JWTClaimsRegistry(
            leeway=self.leeway_s,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.resource},
            exp={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise Unauthorized("the token has expired: get a new one from the issuer") from None
        except MissingClaimError as exc:
            raise Unauthorized(f"the token lacks a required claim ({exc.description})") from None
        except InvalidClaimError as exc:
            raise Unauthorized(self._claim_refusal(str(getattr(exc, "claim", "")))) from None

    def _claim_refusal(self, claim: str) -> str:
        """Why a claim is wrong, in words that name no value from the token."""
        if claim in {"nbf", "iat"}:
            return "the token is not valid yet (nbf or iat in the future)"
        if claim == "iss":
            return f"the token is not from this issuer ({self.issuer})"
        if claim == "aud":
            return f"the token is not for this resource: its audience must be {self.resource}"
        return f"the token has an invalid claim ({claim})"

    def _introspect(self, token: str, meta: IssuerMetadata) -> CheckedToken:
        if meta.introspection_endpoint is None or self.client is None:
            raise Unauthorized(
                "the token is not a JWT and this gateway cannot introspect opaque tokens "
                "(the operator sets AGENTCARDS_OAUTH_CLIENT_ID and _SECRET)"
            )
        try:
            answer = self.fetch(
                meta.introspection_endpoint,
                data={"token": token, "token_type_hint": "access_token"},
                auth=self.client,
            )
        except (httpx.HTTPError, ValueError):
            raise Unauthorized("the issuer cannot be asked about this token; retry later") from None
        if answer.get("active") is not True:
            raise Unauthorized("the token is not active: revoked, expired or unknown to the issuer")
        if answer.get("token_type", "").lower() not in {"", "bearer", "dpop", "access_token"}:
            raise Unauthorized("the token is not an access token")
        claims = dict(answer)
        claims.setdefault("iss", self.issuer)
        if claims.get("sub") is None and answer.get("client_id"):  # a client's own token
            claims["sub"] = answer["client_id"]
        self._check_claims(claims)
        return _checked(claims)

    def _remember(self, token: str, checked: CheckedToken) -> CheckedToken:
        if self.cache_s <= 0:
            return checked
        until = time.time() + self.cache_s
        if checked.expires_at is not None:
            until = min(until, checked.expires_at)
        with self._lock:
            self._checked[_digest(token)] = (until, checked)
            while len(self._checked) > TOKEN_CACHE_SIZE:
                self._checked.popitem(last=False)
        return checked


def _checked(claims: Mapping[str, Any]) -> CheckedToken:
    scope = claims.get("scope")
    scopes = frozenset(scope.split()) if isinstance(scope, str) else frozenset()
    cnf = claims.get("cnf")
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    if cnf is not None and not isinstance(jkt, str):  # bound to something we cannot check
        raise Unauthorized(
            "the token is sender-constrained to a key this gateway cannot see (no cnf.jkt): "
            "use a JWT access token"
        )
    exp = claims.get("exp")
    return CheckedToken(
        claims=Claims(subject=str(claims["sub"]), scopes=scopes, claims=claims),
        jkt=jkt if isinstance(jkt, str) else None,
        expires_at=float(exp) if isinstance(exp, int | float) else None,
    )


def _header(token: str) -> dict[str, Any]:
    try:
        return dict(jws.extract_compact(token.encode()).protected)
    except (JoseError, ValueError):
        raise Unauthorized("the token is not a well-formed JWT") from None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
