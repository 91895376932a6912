"""DPoP proofs (RFC 9449): a sender-constrained token is good only with a fresh proof of its key.

The proof is a JWT (joserfc checks its signature) whose header carries the client's public
key; it must be signed by the key the token is bound to (``cnf.jkt`` is that key's RFC 7638
thumbprint), name this request's method and URL, hash this access token (``ath``), be
recent (``iat``) and never seen before (``jti``, remembered by the caller's ``first_use``).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry

from shared.auth.tokens import ASYMMETRIC_ALGS
from shared.errors import Unauthorized

# A proof older (or younger) than this is refused; its jti is remembered this long, twice over.
PROOF_WINDOW_S = 60


def check_proof(
    proof: str | None,
    *,
    method: str,
    url: str,
    access_token: str,
    jkt: str,
    first_use: Callable[[str, int], bool],
    now: float | None = None,
) -> None:
    """Accept ``proof`` for this request and token, or raise Unauthorized naming what is wrong.

    ``first_use(jti, ttl_s)`` records the proof's ``jti`` and says whether it is new."""
    if not proof:
        raise Unauthorized("this token is DPoP-bound: send it as `Authorization: DPoP <token>` "
                           "with a `DPoP` proof header")  # fmt: skip
    try:
        header = dict(jws.extract_compact(proof.encode()).protected)
        alg = header.get("alg")
        if header.get("typ") != "dpop+jwt" or alg not in ASYMMETRIC_ALGS:
            raise Unauthorized("the DPoP proof must be a `dpop+jwt` signed with an asymmetric key")
        public = header.get("jwk")
        if not isinstance(public, dict) or "d" in public:
            raise Unauthorized("the DPoP proof must carry the client's public key (jwk)")
        key = JWKRegistry.import_key(public)
        claims = jwt.decode(proof, key, algorithms=[str(alg)]).claims
    except JoseError:
        raise Unauthorized("the DPoP proof does not verify") from None
    if key.thumbprint() != jkt:
        raise Unauthorized("the DPoP proof is signed by another key than the token is bound to")
    if str(claims.get("htm", "")).upper() != method.upper() or _bare(claims.get("htu")) != _bare(
        url
    ):
        raise Unauthorized("the DPoP proof is for another request (htm/htu)")
    digest = base64.urlsafe_b64encode(hashlib.sha256(access_token.encode()).digest())
    if claims.get("ath") != digest.rstrip(b"=").decode():
        raise Unauthorized("the DPoP proof is for another access token (ath)")
    iat = claims.get("iat")
    now = time.time() if now is None else now
    if not isinstance(iat, int | float) or abs(now - iat) > PROOF_WINDOW_S:
        raise Unauthorized("the DPoP proof is not fresh (iat): make a new one per request")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise Unauthorized("the DPoP proof has no jti")
    if not first_use(hashlib.sha256(f"{jkt}:{jti}".encode()).hexdigest(), 2 * PROOF_WINDOW_S):
        raise Unauthorized("the DPoP proof was used before (jti): make a new one per request")


def _bare(url: object) -> str:
    """A URL without query and fragment, scheme and host lower-cased (RFC 9449 §4.3)."""
    if not isinstance(url, str):
        return ""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, "", ""))
