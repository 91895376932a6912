"""Secrets in the ``mcpServers`` file, sealed with the stack's PII key (never in plaintext).

``agentcards servers add`` writes a secret input (an API key a server needs in its
environment or a header) as ``sealed:v1:<key id>:<base64 nonce+ciphertext>``: AES-GCM
under a key derived from the PII key (``AGENTCARDS_PII_KEY`` or ``<home>/pii.key``), bound
to the server and variable it belongs to, so a sealed value copied to another entry does
not open. The toolhost opens them when it starts a server; anyone reading the file sees
only the sealed form. A key rotation keeps sealed values readable through
``AGENTCARDS_PII_KEY_PREVIOUS`` until they are sealed again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.errors import ConfigError
from shared.privacy.keys import PiiKeys, key_id

PREFIX = "sealed:v1:"


CONFIG_LABEL = b"mcp-config-secret"


def _key(raw: bytes, label: bytes = CONFIG_LABEL) -> bytes:
    return hmac.new(raw, label, hashlib.sha256).digest()


def _aad(server: str, name: str) -> bytes:
    return f"{server}\x00{name}".encode()


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


def seal(keys: PiiKeys, *, server: str, name: str, value: str) -> str:
    """``value`` sealed for variable ``name`` of ``server``."""
    return seal_bound(keys, label=CONFIG_LABEL, aad=_aad(server, name), value=value)


def seal_bound(keys: PiiKeys, *, label: bytes, aad: bytes, value: str) -> str:
    """``value`` sealed under the key derived for ``label``, opening only with the same ``aad``."""
    nonce = secrets.token_bytes(12)
    sealed = AESGCM(_key(keys.current, label)).encrypt(nonce, value.encode(), aad)
    body = base64.urlsafe_b64encode(nonce + sealed).decode()
    return f"{PREFIX}{key_id(keys.current)}:{body}"


def open_bound(keys: PiiKeys, *, label: bytes, aad: bytes, value: str) -> str | None:
    """The plaintext of ``seal_bound``'s output; None when it does not open (another key,
    another ``aad``, altered)."""
    if not is_sealed(value):
        return None
    kid, _, body = value[len(PREFIX) :].partition(":")
    raw = {key_id(k): k for k in (keys.current, keys.previous) if k is not None}.get(kid)
    if raw is None:
        return None
    try:
        blob = base64.urlsafe_b64decode(body.encode())
        return AESGCM(_key(raw, label)).decrypt(blob[:12], blob[12:], aad).decode()
    except (ValueError, InvalidTag):
        return None


def unseal(keys: PiiKeys, *, server: str, name: str, value: str) -> str:
    """The plaintext of a sealed value (a plain value is returned as it is)."""
    if not is_sealed(value):
        return value
    kid = value[len(PREFIX) :].partition(":")[0]
    if kid not in {key_id(k) for k in (keys.current, keys.previous) if k is not None}:
        raise ConfigError(
            f"server {server!r}: {name} was sealed with a PII key this stack does not have "
            f"(key id {kid}); give it again (`agentcards servers add … --env/--header`)"
        )
    plain = open_bound(keys, label=CONFIG_LABEL, aad=_aad(server, name), value=value)
    if plain is None:
        raise ConfigError(f"server {server!r}: the sealed value of {name} does not open")
    return plain
