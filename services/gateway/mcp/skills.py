"""The caller's learned capabilities as skills on ``/mcp``: the MCP skills extension
(``io.modelcontextprotocol/skills``, SEP-2640).

- declared in the server's capabilities as ``{"directoryRead": true}``, next to
  ``resources``, which serves the files: under ``extensions`` at 2026-07-28
  (``server/discover``); in a 2025-11-25 ``initialize`` answer, whose capabilities have no
  ``extensions`` (the SDK leaves the field out), under ``experimental``, that revision's
  place for capabilities outside the spec;
- ``skills/list`` (pages of ``PAGE_SIZE`` entries; ``cursor`` is the next entry's index) and
  ``skills/get`` give each skill's entry: the URI of its ``SKILL.md``, its front matter as
  written in the file, and every file's ``sha256:`` digest and size;
- a new skill (a capability learned) is announced as a change of the resource list
  (``skill_changes.py``);
- ``resources/read`` of a ``skill://<name>/<path>`` URI returns that file, and
  ``resources/directory/read`` the children of a skill's directory; ``resources/list``
  lists each ``SKILL.md`` after the downstream servers' resources.

Everything is the caller's (its tenant's capabilities that its key may run:
``ops/skills.py``); anything else is ``-32602`` (invalid params), as the extension requires.
The content follows the capability, so results say ``ttlMs: 0`` (re-check before reuse) and
``cacheScope: private`` (another key may see other skills).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import MCPServer
from mcp.server.models import InitializationOptions

from services.gateway.mcp import skill_changes
from services.gateway.mcp.direct import Listeners, subscribe_named, unsubscribe_named
from services.gateway.mcp.errors import protocol_errors
from services.gateway.ops import skills as ops
from services.gateway.state import GatewayState
from shared.auth.principal import Principal
from shared.capabilities.skills import EXTENSION_ID, SCHEME, SKILL_FILE, Skill, file_uri
from shared.errors import ValidationFailed

PAGE_SIZE = 100
SETTINGS: dict[str, Any] = {"directoryRead": True}
TTL_MS = 0
CACHE: dict[str, Any] = {"ttlMs": TTL_MS, "cacheScope": "private"}


class SkillUriParams(types.RequestParams):
    """``skills/get``: the URI of a skill's ``SKILL.md``."""

    uri: str


class DirectoryReadParams(types.PaginatedRequestParams):
    """``resources/directory/read``: a directory's URI (no trailing slash)."""

    uri: str


def register(
    server: MCPServer,
    get_state: Callable[[], GatewayState],
    principal_for: Callable[[object], Awaitable[Principal]],
    listeners: Listeners,
) -> None:
    """Serve the extension's methods and declare it; after ``downstream_resources.register``,
    whose ``resources/list`` and ``resources/read`` it extends with the skills' files.
    ``listeners`` hear a subscribed downstream resource's updates."""
    lowlevel = server._lowlevel_server  # as downstream_resources: no public hook for these
    own_list = lowlevel.get_request_handler("resources/list")
    own_read = lowlevel.get_request_handler("resources/read")
    assert own_list is not None and own_read is not None

    async def skills_of(ctx: ServerRequestContext[Any]) -> list[Skill]:
        principal = await principal_for(ctx.request)
        skill_changes.remember(principal.tenant_id, ctx)  # told when one is learned
        with protocol_errors():
            return await ops.caller_skills(get_state(), principal=principal)

    async def tenant_of(ctx: ServerRequestContext[Any]) -> str:
        return (await principal_for(ctx.request)).tenant_id

    async def skill_at(ctx: ServerRequestContext[Any], uri: str) -> tuple[Skill, str]:
        principal = await principal_for(ctx.request)
        with protocol_errors():
            return await ops.skill_at(get_state(), principal=principal, uri=uri)

    async def list_skills(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        with protocol_errors():
            start = _cursor(params.cursor)
        found = await skills_of(ctx)
        page = found[start : start + PAGE_SIZE]
        result: dict[str, Any] = {"skills": [s.entry() for s in page], **CACHE}
        if start + PAGE_SIZE < len(found):
            result["nextCursor"] = str(start + PAGE_SIZE)
        return result

    async def get_skill(ctx: ServerRequestContext[Any], params: SkillUriParams) -> dict[str, Any]:
        skill, path = await skill_at(ctx, params.uri)
        if path != SKILL_FILE:
            with protocol_errors():
                raise ValidationFailed(
                    f"{params.uri[:200]} is not a skill's URI: skills/get takes the URI of its "
                    f"{SKILL_FILE} ({skill.uri})",
                    field="uri",
                )
        return {"skill": skill.entry(), **CACHE}

    async def read_directory(
        ctx: ServerRequestContext[Any], params: DirectoryReadParams
    ) -> dict[str, Any]:
        skill, path = await skill_at(ctx, params.uri)
        children = skill.children(path)
        if children is None or params.uri.endswith("/"):
            with protocol_errors():
                raise ValidationFailed(
                    f"{params.uri[:200]} is not a directory resource (a skill's directories: "
                    f"{SCHEME}{skill.name} and its subdirectories, no trailing slash)",
                    field="uri",
                )
        return {
            "resources": [
                {
                    "uri": file_uri(skill.name, child),
                    "name": child.rsplit("/", 1)[-1],
                    "mimeType": mime,
                }
                for child, mime in children
            ]
        }

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> Any:
        uri = str(params.uri)
        if not uri.startswith(SCHEME):
            return await own_read.handler(ctx, params)
        skill, path = await skill_at(ctx, uri)
        file = skill.file(path)
        if file is None:
            with protocol_errors():
                raise ValidationFailed(
                    f"skill {skill.name} has no file {path[:200]!r}: its files are "
                    f"{', '.join(f.path for f in skill.files)}",
                    field="uri",
                )
        text = file.content.decode()
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=file.mime_type, text=text)],
            ttl_ms=TTL_MS,
            cache_scope="private",
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams
    ) -> types.ListResourcesResult:
        listed = await own_list.handler(ctx, params)
        assert isinstance(listed, types.ListResourcesResult)
        manifests = [
            types.Resource(
                uri=skill.uri,
                name=skill.name,
                description=skill.frontmatter["description"],
                mime_type="text/markdown",
                size=len(skill.files[0].content),
            )
            for skill in await skills_of(ctx)
        ]
        return listed.model_copy(update={"resources": [*listed.resources, *manifests]})

    async def subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """A skill's file (told when its capability changes: skill_changes.py) or a downstream
        resource (told when its server says it changed, as on /mcp/servers)."""
        uri = str(params.uri)
        principal = await principal_for(ctx.request)
        if uri.startswith(SCHEME):
            await skill_at(ctx, uri)  # NotFound unless the caller has the skill
            skill_changes.subscribe(principal.tenant_id, ctx, uri)
        else:
            await subscribe_named(
                get_state(), ctx, listeners=listeners, principal=principal, seen=uri
            )
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        if uri.startswith(SCHEME):
            skill_changes.unsubscribe(await tenant_of(ctx), ctx, uri)
        else:
            unsubscribe_named(ctx, listeners=listeners, seen=uri)
        return types.EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler(
        "resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe
    )
    lowlevel.add_request_handler("skills/list", types.PaginatedRequestParams, list_skills)
    lowlevel.add_request_handler("skills/get", SkillUriParams, get_skill)
    lowlevel.add_request_handler("resources/directory/read", DirectoryReadParams, read_directory)
    lowlevel.add_request_handler("resources/read", types.ReadResourceRequestParams, read_resource)
    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, list_resources)
    lowlevel.add_request_handler(
        "subscriptions/listen",
        types.SubscriptionsListenRequestParams,
        skill_changes.listen_handler(tenant_of),
    )
    lowlevel.extensions[EXTENSION_ID] = SETTINGS
    own_options = lowlevel.create_initialization_options  # the 2025-11-25 answer only

    def with_experimental(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        experimental = {**(experimental_capabilities or {}), EXTENSION_ID: SETTINGS}
        given = notification_options or NotificationOptions()
        options = NotificationOptions(  # the resource list follows the skills
            prompts_changed=given.prompts_changed,
            resources_changed=True,
            tools_changed=given.tools_changed,
        )
        return own_options(options, experimental, extensions)

    setattr(lowlevel, "create_initialization_options", with_experimental)  # noqa: B010


def _cursor(cursor: str | None) -> int:
    """A ``skills/list`` cursor: the index of the page's first entry, as ``nextCursor`` gave it."""
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 9:
        raise ValidationFailed(
            f"cursor {cursor[:40]!r} is not one skills/list gave (pass its nextCursor as it is)",
            field="cursor",
        )
    return int(cursor)
