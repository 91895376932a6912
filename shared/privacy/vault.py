"""The token vault in Postgres: token → value per tenant, encrypted (AES-GCM), with expiry.

The value is encrypted with the vault key whose id is stored beside it; the tenant and the
token are the associated data, so a row copied to another tenant or token does not decrypt.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from shared.privacy.keys import PiiKeys
from shared.privacy.tokens import Produced

_NONCE = 12


def store_tokens(
    conn: psycopg.Connection[Any],
    *,
    tenant_id: str,
    produced: Mapping[str, Produced],
    keys: PiiKeys,
) -> None:
    """Upsert the produced tokens (an existing row lives on to the later expiry)."""
    if not produced:
        return
    (kid, key), *_ = keys.vault_keys().items()
    aes = AESGCM(key)
    expires = datetime.fromtimestamp(keys.expires_at(), UTC)
    rows = []
    for token, item in produced.items():
        nonce = os.urandom(_NONCE)
        sealed = nonce + aes.encrypt(nonce, item.value.encode(), _aad(tenant_id, token))
        rows.append((tenant_id, token, item.kind, kid, sealed, expires))
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO pii_vault (tenant_id, token, kind, key_id, ciphertext, expires_at)
            VALUES (%s, %s, %s, %s, %s, %s)
            ON CONFLICT (tenant_id, token) DO UPDATE
               SET expires_at = GREATEST(pii_vault.expires_at, EXCLUDED.expires_at)
            """,
            rows,
        )


def resolve_tokens(
    conn: psycopg.Connection[Any], *, tenant_id: str, tokens: Iterable[str], keys: PiiKeys
) -> dict[str, str]:
    """The real values of those of ``tokens`` this tenant's vault holds and that have not
    expired; others are simply absent."""
    wanted = sorted(set(tokens))
    if not wanted:
        return {}
    rows = conn.execute(
        "SELECT token, key_id, ciphertext FROM pii_vault "
        "WHERE tenant_id = %s AND token = ANY(%s) AND expires_at > now()",
        (tenant_id, wanted),
    ).fetchall()
    vault_keys = keys.vault_keys()
    real: dict[str, str] = {}
    for row in rows:
        token, kid, sealed = (row["token"], row["key_id"], bytes(row["ciphertext"]))
        key = vault_keys.get(kid)
        if key is None:  # encrypted under a key no longer configured
            continue
        try:
            plain = AESGCM(key).decrypt(sealed[:_NONCE], sealed[_NONCE:], _aad(tenant_id, token))
        except InvalidTag:
            continue
        real[token] = plain.decode()
    return real


def prune_expired(conn: psycopg.Connection[Any]) -> int:
    """Delete expired rows; returns how many."""
    return conn.execute("DELETE FROM pii_vault WHERE expires_at <= now()").rowcount


def _aad(tenant_id: str, token: str) -> bytes:
    return f"{tenant_id}\x00{token}".encode()
