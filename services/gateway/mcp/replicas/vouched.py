"""A forwarded request carries its caller, as the replica that received it authenticated it,
under a signature only the replicas can make: the replica serving it trusts that caller and
checks the credential no second time.

A credential is checked once, where it arrived: a DPoP proof (RFC 9449) may be used once, so
checking it again on the session's holder would refuse it as a replay. The hop between
replicas is authenticated by Redis' own credentials and, on top, an HMAC of the whole message
under a key derived from ``AGENTCARDS_SECRET_KEY``, which every replica shares: someone who
can write to Redis but does not hold that secret cannot forward a request as anyone. A
message older than its exchange's lifetime is refused too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import time
from typing import Any

from shared.auth.principal import Principal

# Distinguishes this key from every other use of the secret key.
_LABEL = b"agentcards mcp forwarded request v1"
_SIG_LEN = 64  # hex SHA-256


def forward_key(secret: str) -> bytes:
    """The key forwarded requests are signed with, derived from the replicas' shared secret."""
    return hmac.new(secret.encode(), _LABEL, hashlib.sha256).digest()


def seal(key: bytes, message: dict[str, Any], *, principal: Principal) -> bytes:
    """``message`` with its caller and the time it was sent, signed."""
    payload = json.dumps(
        {**message, "principal": _to_wire(principal), "sent": time.time()}
    ).encode()
    return hmac.new(key, payload, hashlib.sha256).hexdigest().encode() + payload


def opened(key: bytes, sealed: bytes, *, max_age_s: float) -> tuple[dict[str, Any], Principal]:
    """The message and its caller; ValueError if the signature is not a replica's or the
    message is older than ``max_age_s``."""
    sig, payload = sealed[:_SIG_LEN], sealed[_SIG_LEN:]
    expected = hmac.new(key, payload, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(sig, expected):
        raise ValueError("a forwarded request not signed by a replica")
    message: dict[str, Any] = json.loads(payload)
    if not abs(time.time() - float(message["sent"])) <= max_age_s:
        raise ValueError("a forwarded request past its exchange's lifetime")
    return message, _from_wire(message.pop("principal"))


def _to_wire(principal: Principal) -> dict[str, Any]:
    wire = {f.name: getattr(principal, f.name) for f in dataclasses.fields(principal)}
    for name in ("tool_patterns", "scopes", "groups"):
        if wire[name] is not None:
            wire[name] = sorted(wire[name]) if name == "scopes" else list(wire[name])
    return wire


def _from_wire(wire: dict[str, Any]) -> Principal:
    fields = {f.name for f in dataclasses.fields(Principal)}
    values = {k: v for k, v in wire.items() if k in fields}
    if values.get("tool_patterns") is not None:
        values["tool_patterns"] = tuple(values["tool_patterns"])
    if values.get("scopes") is not None:
        values["scopes"] = frozenset(values["scopes"])
    values["groups"] = tuple(values.get("groups") or ())
    return Principal(**values)
