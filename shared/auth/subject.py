"""A person's access token on its way from the gateway to the toolhost, sealed.

A server configured with ``"auth": {"type": "token-exchange"}`` gets a token of its own for
the person calling, exchanged at the issuer for the token the person brought (RFC 8693;
docs/upstream-identity.md). The gateway checked that token; the toolhost, which makes the
exchange, reads each call's grant from Redis. So the token rides in the grant sealed:
AES-GCM under a key derived from the stack's PII key, bound to the tenant and the user, so a
sealed token copied into another person's grant does not open. Redis never holds it in
plaintext, and the token itself never goes upstream.
"""

from __future__ import annotations

from shared.privacy.keys import PiiKeys
from shared.privacy.sealed import open_bound, seal_bound

LABEL = b"subject-token"


def _aad(tenant_id: str, user: str) -> bytes:
    return f"{tenant_id}\x00{user}".encode()


def seal_subject(keys: PiiKeys, *, tenant_id: str, user: str, token: str) -> str:
    """``token`` sealed for ``user`` of ``tenant_id``."""
    return seal_bound(keys, label=LABEL, aad=_aad(tenant_id, user), value=token)


def open_subject(keys: PiiKeys, *, tenant_id: str, user: str, sealed: str) -> str | None:
    """The token sealed for ``user`` of ``tenant_id``; None when it does not open for them."""
    return open_bound(keys, label=LABEL, aad=_aad(tenant_id, user), value=sealed)
