"""The caller's capabilities as skills (``shared/capabilities/skills.py``), for the MCP skills
extension on ``/mcp``.

A key sees its tenant's skills only, and of those only the ones it may run: a capability
calling a tool outside the key's allow-list is left out, as ``search_capabilities`` leaves it
out (``execute_capability`` would refuse it with ``tool_not_allowed``).
"""

from __future__ import annotations

from services.gateway.ops.capabilities import out_of_scope_tools
from services.gateway.ops.db import in_pool
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.capabilities.listing import tenant_items
from shared.capabilities.skills import Skill, published, render, skill_names, skills_of, split_uri
from shared.errors import NotFound


async def caller_skills(state: GatewayState, *, principal: Principal) -> list[Skill]:
    """The caller's tenant's runnable capabilities as skills, by skill name."""
    items = published(
        await in_pool(state, lambda conn: tenant_items(conn, tenant_id=principal.tenant_id))
    )
    # Names are made over the tenant's whole set, so a key that sees fewer still names alike.
    return [s for s in skills_of(items) if not out_of_scope_tools(list(s.tools), principal)]


async def skill_at(state: GatewayState, *, principal: Principal, uri: str) -> tuple[Skill, str]:
    """The caller's skill a ``skill://`` URI is in, and the path in it ("" for its root);
    NotFound naming the URI when the caller has no such skill."""
    name, path = split_uri(uri)
    found = next(
        (s for s in await caller_skills(state, principal=principal) if s.name == name), None
    )
    if found is None:
        raise NotFound(
            f"no skill is served at {uri[:200]}: list yours with skills/list", uri=uri[:200]
        )
    return found, path


async def skill_of_capability(
    state: GatewayState, *, tenant_id: str, capability: str
) -> Skill | None:
    """The tenant's skill of the capability named ``capability`` (None: not published: unknown,
    or disabled), named as ``caller_skills`` names it."""
    items = published(await in_pool(state, lambda conn: tenant_items(conn, tenant_id=tenant_id)))
    item = next((i for i in items if i["name"] == capability), None)
    if item is None:
        return None
    return render(item, name=skill_names(i["name"] for i in items)[capability])
