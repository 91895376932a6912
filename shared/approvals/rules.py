"""Who may answer an approval: pure rules over the approval's row and the answering principal.

The policy's ``@approvers`` names groups (a person's token's groups) and key names; the
word ``caller`` lets the caller answer their own call. Without ``@approvers``, any admin of
the tenant (an admin key, or a person holding ``agentcards:admin``) other than the caller.
The caller is never an approver unless the policy says ``caller``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.auth.principal import SCOPE_ADMIN, Principal
from shared.policy.source import CALLER_APPROVES

# Who an answer given through the caller's own MCP client (an elicitation) is recorded as.
CALLERS_HUMAN = "caller (elicitation)"


def approver_name(principal: Principal) -> str:
    """How an answer names who gave it: ``user:<sub>``, ``key:<name or id>``, or ``anonymous``."""
    if principal.user is not None:
        return f"user:{principal.user}"
    if principal.key_id is not None:
        return f"key:{principal.key_name or principal.key_id}"
    return "anonymous"


def caller_name(row: Mapping[str, Any]) -> str:
    """Who made the paused call, named as answers name people: ``user:<sub>`` or
    ``key:<name or id>`` (the name when the row was read with it: ``caller_key_name``)."""
    if row["caller_user"] is not None:
        return f"user:{row['caller_user']}"
    return f"key:{row.get('caller_key_name') or row['caller_key']}"


def is_caller(row: Mapping[str, Any], principal: Principal) -> bool:
    """Whether ``principal`` made the call the approval is about."""
    if row["caller_user"] is not None:
        return principal.user == row["caller_user"]
    return principal.user is None and principal.key_id == row["caller_key"]


def refusal(row: Mapping[str, Any], principal: Principal) -> str | None:
    """Why ``principal`` may not answer the approval ``row`` (None: they may)."""
    if principal.tenant_id != row["tenant_id"]:
        return "another tenant's approval"  # never reached: reads are tenant-scoped
    approvers: list[str] = list(row["approvers"] or [])
    caller = is_caller(row, principal)
    if caller:
        if CALLER_APPROVES in approvers:
            return None
        return "the caller may not approve their own call (the policy's @approvers does not say caller)"
    if approvers:
        names = set(principal.groups)
        if principal.user is None and principal.key_name:
            names.add(principal.key_name)
        if names & set(approvers):
            return None
        return f"only {', '.join(approvers)} may answer it (the policy's @approvers)"
    if principal.admin and principal.allows_scope(SCOPE_ADMIN):
        return None
    return "only an admin of the tenant other than the caller may answer it"
