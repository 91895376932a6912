"""Privacy of what the toolhost publishes itself: a server's progress messages
(``tool_progress`` events) carry tokens, as everything else leaving a run does
(docs/privacy.md). The tenant comes from the execution's grant record."""

from __future__ import annotations

from typing import Any

import redis
from psycopg_pool import ConnectionPool

from shared.auth.grants import read_grant
from shared.config import Settings
from shared.privacy.keys import PiiKeys
from shared.privacy.tokens import Tokenizer
from shared.privacy.vault import store_tokens


class ProgressPrivacy:
    """``(execution_id, tool, message) -> message`` with values replaced by the tenant's
    tokens, stored in the vault; raises when it cannot (the caller then drops the message)."""

    def __init__(self, settings: Settings, pool: ConnectionPool[Any], client: redis.Redis) -> None:
        self._keys = PiiKeys.from_settings(settings)
        self._region = settings.pii_phone_region
        self._pool = pool
        self._redis = client

    def __call__(self, execution_id: str, tool: str, message: str) -> str:
        grant = read_grant(self._redis, execution_id=execution_id)
        if grant is None:
            raise LookupError(f"execution {execution_id} has no grant: no tenant to tokenise for")
        if grant.pii_off:  # a key that opted out of tokenisation (docs/privacy.md)
            return message
        tok = Tokenizer(self._keys.token_key(grant.tenant_id), region=self._region)
        out = tok.text(message, tool=tool)
        if tok.produced:
            with self._pool.connection() as conn:
                store_tokens(
                    conn, tenant_id=grant.tenant_id, produced=tok.produced, keys=self._keys
                )
        return out
