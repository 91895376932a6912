"""The identity file: how a person's token claims become a principal (tenant, groups → limits).

``AGENTCARDS_IDENTITY_CONFIG`` names a JSON file (docs/identity.md)::

    {"tenant_claim": "org", "groups_claim": "groups", "default_tenant": "acme",
     "groups": {"engineers": {"tools": ["time:*"], "scopes": ["agentcards:read"],
                              "rate_limit_per_min": 60}}}

It is validated when the gateway starts; a mistake is a ConfigError naming the file, the
path inside it and the reason. A user in several groups gets the union of their tools and
scopes and the most generous of their limits; a user in no mapped group gets the least: no
scope and no tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.auth.keys import check_tenant, check_tool_patterns
from shared.auth.principal import SCOPE_ADMIN, SCOPES, Principal
from shared.errors import ConfigError, Forbidden


class GroupRules(BaseModel):
    """What the members of one group may do; an omitted limit is no limit, omitted tools are none."""

    model_config = ConfigDict(extra="forbid")

    tools: list[str] = Field(default_factory=list)
    scopes: list[str] = Field(default_factory=list)
    rate_limit_per_min: int | None = Field(default=None, ge=1)
    tool_calls_per_min: int | None = Field(default=None, ge=1)
    max_concurrent: int | None = Field(default=None, ge=1)
    mcp_mode: Literal["code", "direct", "both"] | None = None

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str]) -> list[str]:
        return list(check_tool_patterns(value) or ())

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        unknown = [s for s in value if s not in SCOPES]
        if unknown:
            raise ValueError(f"unknown scope {unknown[0]!r}: use {', '.join(SCOPES)}")
        return value


class IdentityConfig(BaseModel):
    """The identity file's contents."""

    model_config = ConfigDict(extra="forbid")

    tenant_claim: str = "org"
    groups_claim: str = "groups"
    default_tenant: str | None = None
    groups: dict[str, GroupRules] = Field(default_factory=dict)

    @field_validator("default_tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        return None if value is None else check_tenant(value)


# No identity file: nobody is in a mapped group, so every user gets the least.
EMPTY = IdentityConfig()


def load_identity(path: Path | None) -> IdentityConfig:
    """The identity file parsed and checked; ConfigError naming file, path and reason."""
    if path is None:
        return EMPTY
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"identity file {path}: cannot read it ({exc.strerror})") from exc
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"identity file {path}: not JSON ({exc})") from exc
    try:
        return IdentityConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        reason = str(error["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"identity file {path}: at {where}: {reason}") from exc


@dataclass(frozen=True, slots=True)
class Claims:
    """What a checked token says about its bearer."""

    subject: str
    scopes: frozenset[str]
    claims: Mapping[str, Any]


def principal_for(config: IdentityConfig, claims: Claims) -> Principal:
    """The principal of a person: tenant from the tenant claim (else the default), tools and
    limits from their mapped groups, scopes = the token's narrowed by the groups'."""
    tenant = claims.claims.get(config.tenant_claim) or config.default_tenant
    if not isinstance(tenant, str):
        raise Forbidden(
            f"the token names no organisation (claim {config.tenant_claim!r}) and the "
            "identity file has no default_tenant"
        )
    try:
        check_tenant(tenant)
    except ValueError as exc:
        raise Forbidden(f"the token's {config.tenant_claim!r} claim is not a tenant id") from exc
    names = _groups(claims.claims.get(config.groups_claim))
    rules = [config.groups[g] for g in names if g in config.groups]
    scopes = claims.scopes & frozenset(s for r in rules for s in r.scopes)
    patterns = tuple(dict.fromkeys(p for r in rules for p in r.tools))
    modes = [r.mcp_mode for r in rules if r.mcp_mode is not None]
    return Principal(
        tenant_id=tenant,
        user=claims.subject,
        scopes=scopes,
        tool_patterns=patterns,
        executions_per_min=_most(r.rate_limit_per_min for r in rules),
        tool_calls_per_min=_most(r.tool_calls_per_min for r in rules),
        max_concurrent=_most(r.max_concurrent for r in rules),
        admin=SCOPE_ADMIN in scopes,
        mcp_mode=modes[0] if modes else None,
        groups=tuple(names),
        email=email if isinstance(email := claims.claims.get("email"), str) else None,
    )


def _groups(value: Any) -> list[str]:
    """The groups claim as names (a list, or one space-separated string)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [g for g in value if isinstance(g, str)]
    return []


def _most(limits: Iterable[int | None]) -> int | None:
    """The most generous of the groups' limits: any group without one means no limit.

    No group at all is no rule to be generous with: the user has no scope, so nothing to limit.
    """
    values = list(limits)
    if not values or any(v is None for v in values):
        return None
    return max(v for v in values if v is not None)
