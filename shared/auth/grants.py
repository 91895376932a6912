"""Grant records: what one execution may call, written by the gateway, read by workers and toolhosts.

The gateway writes the record at submission (before the execution is queued) under
``grant_key(execution_id)``; the sandbox worker narrows the bridge's scope to it and every
toolhost checks each RPC request against it, so a forged request naming another tool, or an
execution nobody granted, is refused (fail closed: no record, no tool calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
import redis

from shared.auth.patterns import cached_patterns
from shared.auth.principal import PII_OFF, PII_TOKENIZE, Principal
from shared.queues import grant_key

# A grant outlives its execution's deadline by this much: the time an execution may wait
# in the queue before a worker claims it. The worker shortens it to the run's own deadline
# when it claims the row and deletes it when the run ends, so only queued runs hold it.
GRANT_QUEUE_SLACK_S = 24 * 3600
# After a claim: the wall-time limit plus the last tool call's reply and the bridge's teardown.
GRANT_RUN_SLACK_S = 60


@dataclass(frozen=True, slots=True)
class Grant:
    """One execution's tool scope (``tools`` and ``patterns``: None = no limit) and its caller's rate."""

    tenant_id: str
    key_id: str | None = None
    tools: tuple[str, ...] | None = None
    patterns: tuple[str, ...] | None = None
    tool_calls_per_min: int | None = None
    # The submitting key's ``pii`` setting: "off" runs are not tokenised (docs/privacy.md).
    pii: str = PII_TOKENIZE
    user: str | None = None  # the person who submitted it (an OAuth token's subject)
    # What policies decide each call with (docs/policy.md): the caller's facts, where the
    # call comes from (code, direct, capability) and the script's language (None: direct).
    key_name: str | None = None
    groups: tuple[str, ...] = ()
    email: str | None = None
    surface: str = "code"
    language: str | None = None
    # The person's access token, sealed for them (shared/auth/subject.py), for the servers
    # that act for the person calling (docs/upstream-identity.md); never in plaintext here.
    subject_token: str | None = field(default=None, repr=False)

    @classmethod
    def for_principal(
        cls,
        principal: Principal,
        *,
        tools: list[str] | None,
        surface: str = "code",
        language: str | None = None,
    ) -> Grant:
        """The grant of an execution submitted by ``principal`` with the explicit scope ``tools``."""
        return cls(
            tenant_id=principal.tenant_id,
            key_id=principal.key_id,
            tools=None if tools is None else tuple(tools),
            patterns=principal.tool_patterns,
            tool_calls_per_min=principal.tool_calls_per_min,
            pii=principal.pii,
            user=principal.user,
            key_name=principal.key_name,
            groups=principal.groups,
            email=principal.email,
            surface=surface,
            language=language,
            subject_token=principal.subject_token,
        )

    @property
    def pii_off(self) -> bool:
        """Whether the run's key opted out of tokenisation."""
        return self.pii == PII_OFF

    def allows(self, tool_id: str) -> bool:
        """True when ``tool_id`` is in the explicit scope (if any) and matched by the patterns (if any)."""
        if self.tools is not None and tool_id not in self.tools:
            return False
        return self.patterns is None or cached_patterns(self.patterns).allows(tool_id)

    @property
    def rate_key(self) -> str:
        """Whose tool calls share one per-minute counter: the API key, else the user, else the tenant."""
        if self.key_id:
            return f"key:{self.key_id}"
        return f"user:{self.tenant_id}:{self.user}" if self.user else f"tenant:{self.tenant_id}"

    def encode(self) -> bytes:
        """The JSON stored in Redis."""
        return orjson.dumps(
            {
                "v": 1,
                "tenant_id": self.tenant_id,
                "key_id": self.key_id,
                "tools": self.tools,
                "patterns": self.patterns,
                "tool_calls_per_min": self.tool_calls_per_min,
                "pii": self.pii,
                "user": self.user,
                "key_name": self.key_name,
                "groups": self.groups,
                "email": self.email,
                "surface": self.surface,
                "language": self.language,
                "subject_token": self.subject_token,
            }
        )

    @classmethod
    def decode(cls, raw: bytes | str) -> Grant:
        """Parse a stored record; ValueError when it is not one (treated as no grant)."""
        data = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("not a version-1 grant record")
        tools, patterns, limit = (
            data.get("tools"),
            data.get("patterns"),
            data.get("tool_calls_per_min"),
        )
        return cls(
            tenant_id=str(data["tenant_id"]),
            key_id=data.get("key_id"),
            tools=None if tools is None else tuple(str(t) for t in tools),
            patterns=None if patterns is None else tuple(str(p) for p in patterns),
            tool_calls_per_min=None if limit is None else int(limit),
            # Only an explicit "off" opts out: a record without it (an older gateway's) or
            # with anything else is tokenised.
            pii=PII_OFF if data.get("pii") == PII_OFF else PII_TOKENIZE,
            user=data.get("user"),
            key_name=data.get("key_name"),
            groups=tuple(str(g) for g in data.get("groups") or ()),
            email=data.get("email"),
            surface=str(data.get("surface") or "code"),
            language=data.get("language"),
            subject_token=data.get("subject_token"),
        )


def write_grant(client: redis.Redis, *, execution_id: str, grant: Grant, timeout_s: float) -> None:
    """Store the grant of a queued execution; it expires a queueing slack after its deadline."""
    client.set(grant_key(execution_id), grant.encode(), ex=int(timeout_s) + GRANT_QUEUE_SLACK_S)


def load_grant(raw: bytes | str | None) -> Grant | None:
    """A stored record parsed, or None when there is none or it is unreadable (fail closed)."""
    if raw is None:
        return None
    try:
        return Grant.decode(raw)
    except (ValueError, KeyError, TypeError):
        return None


def read_grant(client: redis.Redis, *, execution_id: str) -> Grant | None:
    """The execution's grant, or None when there is none (never written, expired, or unreadable)."""
    raw: bytes | None = client.get(grant_key(execution_id))  # type: ignore[assignment]
    return load_grant(raw)
