"""The principal a request runs as: its tenant, its key or user, and what it may do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shared.config import DEFAULT_TENANT

# A key's ``pii`` setting: the stack's tokenisation applies, or the key opted out.
PII_TOKENIZE = "tokenize"
PII_OFF = "off"
PII_MODES = (PII_TOKENIZE, PII_OFF)
# What a key's `/mcp` serves when the request does not say (README "Code mode or direct"):
# code mode's tools, every server's tools directly (`<server>.<tool>`), or both.
McpMode = Literal["code", "direct", "both"]
MCP_MODES: tuple[McpMode, ...] = ("code", "direct", "both")
# What a person's access token may do (docs/identity.md); an API key is not scoped.
SCOPE_READ = "agentcards:read"  # list, search, read
SCOPE_EXECUTE = "agentcards:execute"  # run code or a capability, call a tool directly
SCOPE_ADMIN = "agentcards:admin"  # capability admin, cache, audit, PII resolution
SCOPES = (SCOPE_READ, SCOPE_EXECUTE, SCOPE_ADMIN)


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller (an API key, or a person signed in at the OAuth issuer: ``user``); every
    tenant-scoped read and write uses ``tenant_id``.

    ``None`` in a limit means "no limit"; ``tool_patterns`` of ``None`` means every tool
    (patterns are ``server:*``, ``server:tool`` or globs over ``server:tool`` ids).
    ``scopes`` of ``None`` (a key) means every scope; a person has what their token and
    groups both grant.
    """

    tenant_id: str
    key_id: str | None = None
    tool_patterns: tuple[str, ...] | None = None
    executions_per_min: int | None = None
    tool_calls_per_min: int | None = None
    max_concurrent: int | None = None
    admin: bool = True
    # "off": a trusted back-office key whose runs are not tokenised (docs/privacy.md).
    pii: str = PII_TOKENIZE
    mcp_mode: McpMode | None = None  # None: code mode
    user: str | None = None  # the token's issuer-unique subject (`sub`)
    scopes: frozenset[str] | None = None
    # What policies see of the caller (docs/policy.md): the key's name; a person's groups
    # (every group the token names, mapped or not) and email.
    key_name: str | None = None
    groups: tuple[str, ...] = ()
    email: str | None = None
    # The person's access token, sealed for them (shared/auth/subject.py): what the toolhost
    # exchanges for a token-exchange server's own token. None for keys and dashboard sessions.
    subject_token: str | None = field(default=None, repr=False, compare=False)

    @property
    def limit_id(self) -> str | None:
        """Whose rate limits a request counts against: the key, else the user, else none."""
        if self.key_id is not None:
            return self.key_id
        return f"user:{self.tenant_id}:{self.user}" if self.user is not None else None

    def allows_scope(self, scope: str) -> bool:
        """Whether this caller holds ``scope`` (a key holds every scope)."""
        return self.scopes is None or scope in self.scopes

    @property
    def pii_off(self) -> bool:
        """Whether this caller's runs return values in clear (the key opted out of PII)."""
        return self.pii == PII_OFF


# The caller when no API key exists (loopback-only serving) or auth is explicitly off.
ANONYMOUS = Principal(tenant_id=DEFAULT_TENANT)
