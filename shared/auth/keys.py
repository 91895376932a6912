"""API key material: generation, hashing, format checks, and the options a key is created with.

Keys are ``ack_`` + 43 url-safe characters (32 random bytes, 256 bits). The database
holds only ``sha256(key)`` in hex. A fast unsalted hash is enough here, unlike for
passwords: a preimage search over 2^256 random keys is out of reach, so there is no
dictionary to guard against, and a server secret (HMAC) would add nothing but one more
thing to lose or rotate (rotating it would silently invalidate every key). Lookups are by
hash (a unique index), so no key is ever compared byte by byte. Stdlib only.
"""

from __future__ import annotations

import hashlib
import re
import secrets

KEY_PREFIX = "ack_"
KEY_BYTES = 32  # 256 bits of entropy
# token_urlsafe(32) is 43 characters of [A-Za-z0-9_-]
_KEY = re.compile(rf"^{KEY_PREFIX}[A-Za-z0-9_-]{{43}}$")
SHOWN_CHARS = 8  # `keys list` shows ack_ + this many characters: 48 of 256 bits, harmless

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TENANT_RULE = (
    "tenant ids are 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
)
# A tool pattern is a glob over `server:tool` ids: `server:*`, `server:tool`, `*:read_*`.
_TOOL_PATTERN = re.compile(r"^[A-Za-z0-9_*?\[\]-]{1,64}:[A-Za-z0-9_.*?\[\]-]{1,128}$")
TOOL_PATTERN_RULE = (
    "tool patterns look like 'server:tool', 'server:*' or a glob over 'server:tool' ids "
    "('*', '?', '[...]' allowed on either side of the colon)"
)
_RATE = re.compile(r"^\s*(\d+)\s*(?:/\s*(?:m|min|minute))?\s*$")


def new_key() -> str:
    """A fresh API key, shown to the operator once and never stored."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def hash_key(key: str) -> str:
    """The stored form of a key: sha256 hex (see the module docstring for why no HMAC)."""
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_key(token: str) -> bool:
    """Whether ``token`` has the shape of a key; anything else is refused without a lookup."""
    return bool(_KEY.match(token))


def shown_prefix(key: str) -> str:
    """The part of a key `keys list` shows so an operator can tell keys apart."""
    return key[: len(KEY_PREFIX) + SHOWN_CHARS]


def check_tenant(tenant_id: str) -> str:
    """``tenant_id`` if it is a valid tenant id; ValueError naming the rule otherwise."""
    if not TENANT_PATTERN.match(tenant_id):
        raise ValueError(f"invalid tenant {tenant_id!r}: {TENANT_RULE}")
    return tenant_id


def check_tool_patterns(patterns: list[str] | None) -> tuple[str, ...] | None:
    """The patterns, deduplicated in order; None (every tool) stays None; ValueError on a bad one."""
    if patterns is None:
        return None
    bad = [p for p in patterns if not _TOOL_PATTERN.match(p)]
    if bad:
        raise ValueError(f"invalid tool pattern {bad[0]!r}: {TOOL_PATTERN_RULE}")
    return tuple(dict.fromkeys(patterns))


def parse_per_minute(text: str | None, *, option: str) -> int | None:
    """``"60/min"`` or ``"60"`` as 60; None stays None (no limit); ValueError otherwise."""
    if text is None:
        return None
    match = _RATE.match(text)
    if match is None:
        raise ValueError(
            f"{option} must look like 60/min (a whole number per minute), got {text!r}"
        )
    value = int(match.group(1))
    if value < 1:
        raise ValueError(f"{option} must be at least 1/min (omit it for no limit)")
    return value
