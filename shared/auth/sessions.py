"""The dashboard's sessions, kept in Redis: the browser holds an opaque random id, nothing else.

A session holds what the person's checked access token said (subject, scopes, claims: no
token) and the CSRF token its page sends with writes; a sign-in under way holds its OAuth
state, PKCE verifier, nonce and where to go after. Both are keyed by the SHA-256 of the
cookie's value, so a Redis dump does not give anyone a cookie that works, and both expire.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import asdict, dataclass
from typing import Any

import orjson
import redis.asyncio as aioredis

from shared.auth.identity import Claims
from shared.queues import SESSION_PREFIX, SIGNIN_PREFIX

# A session ends with its access token, and never lasts longer than this.
SESSION_MAX_S = 8 * 3600
# A person has this long at the identity provider to sign in.
SIGNIN_TTL_S = 600


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in person, as the dashboard's requests run as them."""

    subject: str
    name: str
    scopes: list[str]
    claims: dict[str, Any]
    csrf: str
    expires_at: float

    def token_claims(self) -> Claims:
        """The claims the identity file maps to a principal (as a bearer token's would be)."""
        return Claims(subject=self.subject, scopes=frozenset(self.scopes), claims=self.claims)


def new_secret() -> str:
    """A random value for a cookie, a state, a nonce or a CSRF token (256 bits)."""
    return secrets.token_urlsafe(32)


def _key(prefix: str, cookie: str) -> str:
    return prefix + hashlib.sha256(cookie.encode()).hexdigest()


class SessionStore:
    """Sessions and sign-ins under way, in Redis by the hash of their cookie."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client

    async def create(self, session: Session, *, ttl_s: int) -> str:
        """Store ``session``; the cookie value that finds it."""
        cookie = new_secret()
        await self.client.set(_key(SESSION_PREFIX, cookie), orjson.dumps(asdict(session)), ex=ttl_s)
        return cookie

    async def get(self, cookie: str) -> Session | None:
        """The session of a cookie; None when unknown, ended or signed out."""
        raw = await self.client.get(_key(SESSION_PREFIX, cookie))
        return Session(**orjson.loads(raw)) if raw else None

    async def end(self, cookie: str) -> None:
        """Sign out: the cookie finds nothing from now on, in every gateway process."""
        await self.client.delete(_key(SESSION_PREFIX, cookie))

    async def start_signin(self, data: dict[str, str]) -> str:
        """Remember a sign-in under way (state, verifier, nonce, next); its cookie value."""
        cookie = new_secret()
        await self.client.set(_key(SIGNIN_PREFIX, cookie), orjson.dumps(data), ex=SIGNIN_TTL_S)
        return cookie

    async def finish_signin(self, cookie: str) -> dict[str, str] | None:
        """The sign-in under way of this cookie, once: a replayed callback finds nothing."""
        raw = await self.client.getdel(_key(SIGNIN_PREFIX, cookie))
        return orjson.loads(raw) if raw else None
