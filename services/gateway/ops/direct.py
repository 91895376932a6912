"""Direct federation: each configured server's tools called as themselves, one call at a time.

The MCP front end serves every configured server at ``/mcp/servers/<name>`` (its own tool
names) and all of them at ``/mcp/servers`` (names ``<server>.<tool>``, see
``aggregate_name``). A direct call is recorded as an execution like any other: its code is
one line calling the tool with the call's arguments as ``args``, its scope that one tool.
It runs without a sandbox (``direct_call.py``: gateway → RPC channel → toolhost), through
the same code as a sandbox run for the key's allow-list and rate limits, the audit row, the
result cache (read-only tools only, the same invalidation), the privacy layer, the trace,
``tool_calls``, metrics, spans and learning. ``extras.direct`` records the MCP session and
the tool it called before: learning adds that sequence to the tool graph
(``shared.graph.edges.session_edges``).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from anyio import to_thread
from pydantic import ValidationError

from services.gateway.ops import direct_call
from services.gateway.ops.admission import admit_direct, admit_direct_on_loop
from services.gateway.ops.db import in_pool, on_loop
from services.gateway.ops.direct_call import DirectCall
from services.gateway.state import GatewayState
from shared import tool_ids
from shared.auth.patterns import cached_patterns
from shared.auth.principal import Principal
from shared.db import DictConnection, autocommit
from shared.errors import AgentCardsError, NotFound, ToolNotAllowed
from shared.executions.models import ExecutionRequest
from shared.rpc.upstream import TASKS_EXTENSION
from shared.server_states import ServerState
from shared.tools import servers as servers_store
from shared.tools.apps import offers_apps
from shared.tools.servers import server_info
from shared.tools.store import (
    TOOLS_VERSION_SQL,
    awaiting_servers_at,
    configured,
    run_tools_at,
    tools_held,
    tools_held_at,
    tools_version,
)

# MCP's tool-name rule (2025-11-25): 1-128 of [A-Za-z0-9_.-]. Server names never hold a dot
# (shared/tool_ids.py), so ``<server>.<tool>`` splits at its first dot, whatever the tool is.
AGGREGATE_SEPARATOR = "."
MAX_TOOL_NAME = 128
# How the aggregate views (``/mcp/servers``, ``/mcp`` in direct or both mode) name a tool:
# ``<server>.<tool>`` always, or its own name unless another listed tool has that name.
ToolNaming = Literal["prefixed", "bare"]
TOOL_NAMINGS: tuple[ToolNaming, ...] = ("prefixed", "bare")


@dataclass(frozen=True, slots=True)
class DirectTool:
    """One downstream tool as the direct surface lists it."""

    id: str  # server:tool
    server: str
    name: str  # the server's own name of it
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]
    # its server's "pii" setting: the kinds tokenised in its data (None: every kind)
    pii_kinds: frozenset[str] | None = None


def aggregate_name(server: str, tool: str) -> str:
    """The tool's name on the aggregate endpoint: ``<server>.<tool>``.

    Collision-free because a server name has no dot; over MCP's 128 characters (a 64-character
    server and a long tool name), the name keeps its first 119 characters and ends with
    ``-`` and 8 hex digits of the full name's sha256 (resolved through the listing, never parsed).
    """
    name = f"{server}{AGGREGATE_SEPARATOR}{tool}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}-{digest}"


def listed_names(
    tools: Iterable[DirectTool], *, naming: ToolNaming, reserved: Collection[str] = ()
) -> dict[str, str]:
    """Each tool's name on an aggregate view, by tool id: the one place these names are made.

    ``prefixed``: ``aggregate_name`` (``<server>.<tool>``). ``bare``: the tool's own name,
    unless another tool of ``tools`` (the caller's visible ones) has it too or it is one of
    ``reserved`` (code mode's tools, in both mode); such a tool falls back to its prefixed
    name, and so does one whose own name is another's fallback (repeated until none is), so
    every name is listed once. Depends only on the set of tools, not on their order."""
    tools = list(tools)
    prefixed = {tool.id: aggregate_name(tool.server, tool.name) for tool in tools}
    if naming == "prefixed":
        return prefixed
    bare = {tool.id: tool.name for tool in tools}
    while True:
        counts = Counter(bare.values())
        taken = set(reserved) | {name for key, name in prefixed.items() if key not in bare}
        clashing = {key for key, name in bare.items() if counts[name] > 1 or name in taken}
        if not clashing:
            return {key: bare.get(key, name) for key, name in prefixed.items()}
        for key in clashing:
            del bare[key]


def direct_code(tool_id: str) -> str:
    """The code of a direct call: the tool with the call's arguments (``args``), its value returned."""
    ref = tool_ids.parse(tool_id)
    return f"# direct call of {tool_id}\nreturn await mcp[{ref.server!r}][{ref.name!r}](**args)\n"


async def served_servers(state: GatewayState) -> dict[str, str]:
    """The configured servers the direct surface serves (every one not ``removed``), with state."""
    rows = await in_pool(
        state,
        lambda conn: conn.execute(
            "SELECT name, state FROM mcp_servers WHERE state IS DISTINCT FROM %s ORDER BY name",
            (ServerState.REMOVED.value,),
        ).fetchall(),
    )
    return {row["name"]: row["state"] for row in rows}


@dataclass(frozen=True, slots=True)
class Identity:
    """What a server's direct endpoint says of itself at ``initialize``: the downstream
    server's own instructions, version and title (from its last ``initialize`` answer)."""

    instructions: str | None
    version: str
    title: str | None
    protocol_version: str | None
    apps: bool = False  # it offers MCP Apps (the endpoint declares the extension too)


async def identity(state: GatewayState, *, server: str) -> Identity:
    """``server``'s identity as the toolhost last saw it (empty before it ever connected)."""
    info = await in_pool(state, lambda conn: server_info(conn, server=server)) or {}
    implementation = info.get("serverInfo") or {}
    return Identity(
        instructions=info.get("instructions"),
        version=str(implementation.get("version") or ""),
        title=implementation.get("title") or implementation.get("name"),
        protocol_version=info.get("protocolVersion"),
        apps=offers_apps(info),
    )


async def speaks_tasks(state: GatewayState, *, server: str) -> bool:
    """Whether ``server`` advertised MCP Tasks when the toolhost last connected: it then
    decides which of its calls are tasks (``capabilities.extensions``)."""
    info = await in_pool(state, lambda conn: server_info(conn, server=server)) or {}
    extensions = (info.get("capabilities") or {}).get("extensions") or {}
    return TASKS_EXTENSION in extensions


async def direct_tools(
    state: GatewayState, *, patterns: tuple[str, ...] | None, server: str | None = None
) -> list[DirectTool]:
    """The tools a caller may call directly: available, of ``server`` (None: every server),
    allowed by ``patterns``, its key's allow-list (a tool it may not call is not listed)."""
    return _listed(await in_pool(state, _tool_rows), patterns=patterns, server=server)


def _listed(
    rows: list[dict[str, Any]], *, patterns: tuple[str, ...] | None, server: str | None = None
) -> list[DirectTool]:
    """``direct_tools`` of the tools' rows ``rows``."""
    allows = (lambda _id: True) if patterns is None else cached_patterns(patterns).allows
    return [
        DirectTool(
            id=row["id"],
            server=row["server"],
            name=row["name"],
            description=row["description"] or "",
            input_schema=row["input_schema"] or {"type": "object"},
            output_schema=row["output_schema"],
            annotations=row["annotations"] or {},
            pii_kinds=None if row.get("pii") is None else frozenset(row["pii"]["kinds"]),
        )
        for row in rows
        if row["available"] and (server is None or row["server"] == server) and allows(row["id"])
    ]


async def tools_ui(state: GatewayState) -> dict[str, dict[str, Any]]:
    """Per tool id, the MCP Apps part of the ``_meta`` of each tool that has a UI (listed
    to clients that declared Apps: docs/mcp-apps.md)."""

    def read(conn: DictConnection) -> dict[str, dict[str, Any]]:
        with autocommit(conn):
            return servers_store.tools_ui(conn)

    by_server = await in_pool(state, read)
    return {
        tool_ids.make(server, name): meta
        for server, tools in by_server.items()
        for name, meta in tools.items()
    }


def _tool_rows(conn: DictConnection) -> list[dict[str, Any]]:
    """``list_tools``' rows, read once per version of the tools (``run_tools_at``: a call
    reads the version, not every tool's schema)."""
    return _callable(conn)[0]


def _callable(conn: DictConnection) -> tuple[list[dict[str, Any]], frozenset[str]]:
    """``_tool_rows`` and the servers awaiting a person's connection (``_found``'s inputs)."""
    with autocommit(conn):  # one read: no BEGIN and COMMIT round trips around it
        version = tools_version(conn)
        rows = configured(run_tools_at(conn, version=version))
        return rows, awaiting_servers_at(conn, version=version)


async def find_tool(
    state: GatewayState,
    *,
    principal: Principal,
    server: str | None,
    name: str,
    naming: ToolNaming = "prefixed",
    reserved: Collection[str] = (),
) -> DirectTool:
    """The tool a direct call names: its own name on ``server``'s endpoint, its aggregate name
    on the aggregate one (``server`` None; ``naming`` and ``reserved`` as ``listed_names``:
    with bare names, the tool listed under ``name``, else a ``<server>.<tool>`` name still
    reaches its tool). NotFound when it does not exist, is unavailable or is a bare name of
    several tools, ToolNotAllowed when the caller's key may not call it."""
    rows, awaiting = await in_pool(state, _callable)
    return _found(rows, principal=principal, server=server, name=name, naming=naming,
                  reserved=reserved, awaiting=awaiting)  # fmt: skip


def _found(
    rows: list[dict[str, Any]],
    *,
    principal: Principal,
    server: str | None,
    name: str,
    naming: ToolNaming,
    reserved: Collection[str],
    awaiting: Collection[str] = (),
) -> DirectTool:
    """``find_tool`` among the tools' rows ``rows``; a name on one of the ``awaiting`` servers
    (tools unknown until a person connects it) is taken as its tool: the toolhost answers."""
    if server is None and naming == "bare":
        visible = _listed(rows, patterns=principal.tool_patterns)
        names = listed_names(visible, naming=naming, reserved=reserved)
        for tool in visible:
            if names[tool.id] == name:
                return tool
        several = sorted(names[tool.id] for tool in visible if tool.name == name)
        if len(several) > 1:
            raise NotFound(
                f"tool name {name[:200]!r} is on several servers: call one of "
                f"{', '.join(several)} (see tools/list)",
                tool=name[:200],
            )
    for tool in _listed(rows, patterns=None, server=server):
        listed = tool.name if server is not None else aggregate_name(tool.server, tool.name)
        if listed != name:
            continue
        patterns = principal.tool_patterns
        if patterns is not None and not cached_patterns(patterns).allows(tool.id):
            raise ToolNotAllowed(f"this API key may not call {tool.id}", tool=tool.id)
        return tool
    unlisted = _on_awaiting(server, name, awaiting)
    if unlisted is not None:
        patterns = principal.tool_patterns
        if patterns is not None and not cached_patterns(patterns).allows(unlisted.id):
            raise ToolNotAllowed(f"this API key may not call {unlisted.id}", tool=unlisted.id)
        return unlisted
    where = f"server {server!r}" if server is not None else "any server"
    raise NotFound(f"no tool {name[:200]!r} on {where} (see tools/list)", tool=name[:200])


def _on_awaiting(server: str | None, name: str, awaiting: Collection[str]) -> DirectTool | None:
    """The tool ``name`` (on ``server``, else an aggregate ``<server>.<tool>`` name) of a server
    whose tools are not known until a person connects it; None for any other."""
    if server is None:
        server, _, name = name.partition(AGGREGATE_SEPARATOR)
    if server not in awaiting or not tool_ids.is_tool_id(tool_ids.make(server, name)):
        return None
    return DirectTool(id=tool_ids.make(server, name), server=server, name=name, description="",
                      input_schema={"type": "object"}, output_schema=None, annotations={})  # fmt: skip


@dataclass(frozen=True, slots=True)
class Admitted:
    """A direct call's tool and its admission: ``call`` to run, or the ``refusal`` that
    answers it before it ran (rate limit, sizes, bad arguments, an outage)."""

    tool: DirectTool
    call: DirectCall | None
    refusal: AgentCardsError | ValidationError | None = None


async def find_and_admit(
    state: GatewayState,
    *,
    principal: Principal,
    server: str | None,
    name: str,
    arguments: dict[str, Any],
    session_id: str | None,
    relay: tuple[list[str], float] | None = None,
    on_record: direct_call.OnRecord | None = None,
    naming: ToolNaming = "prefixed",
    reserved: Collection[str] = (),
    execution_id: str | None = None,
) -> Admitted:
    """``find_tool``, then the call admitted as an execution of that tool alone (checked,
    perhaps a cache hit; ``direct_call.run`` then runs it without a sandbox and records it),
    on the event loop when nothing needs a thread (``_found_on_loop``), else the tools read
    and the admission in one thread hop. ``session_id`` (the MCP session) ties
    consecutive calls into a sequence for the tool graph; ``relay``: the capabilities its
    client relays and their lease, advertised with the admission; ``on_record``: the call on
    its session's record, from the admission to its end. The tool not found or not
    allowed raises (NotFound, ToolNotAllowed) as ``find_tool`` does. ``execution_id``: the
    execution a call paused for approval goes on as (``direct_call.admit``)."""

    def find_then_admit() -> tuple[DirectTool, ExecutionRequest | None, Any]:
        with state.pool.connection() as conn:
            with autocommit(conn):  # one read: no BEGIN and COMMIT round trips around it
                version = tools_version(conn)
                known = run_tools_at(conn, version=version)
                awaiting = awaiting_servers_at(conn, version=version)
            tool = _found(configured(known), principal=principal, server=server, name=name,
                          naming=naming, reserved=reserved, awaiting=awaiting)  # fmt: skip
            try:
                request = direct_request(tool, arguments)
                admission = admit_direct(
                    state, request=request, principal=principal, conn=conn, known=known
                )
            except (AgentCardsError, ValidationError) as exc:
                return tool, None, exc
            return tool, request, admission

    found = await _found_on_loop(state, principal=principal, server=server, name=name,
                                 arguments=arguments, naming=naming, reserved=reserved)  # fmt: skip
    if found is None:
        found = await to_thread.run_sync(find_then_admit)
    tool, request, admission = found
    if request is None:
        return Admitted(tool, None, admission)
    try:
        call = await direct_call.admit(
            state,
            request=request,
            admission=admission,
            tool_id=tool.id,
            server=tool.server,
            pii_kinds=tool.pii_kinds,
            input_schema=tool.input_schema,
            principal=principal,
            session_id=session_id,
            relay=relay,
            on_record=on_record,
            execution_id=execution_id,
        )
    except AgentCardsError as exc:
        return Admitted(tool, None, exc)
    return Admitted(tool, call)


async def _found_on_loop(
    state: GatewayState,
    *,
    principal: Principal,
    server: str | None,
    name: str,
    arguments: dict[str, Any],
    naming: ToolNaming,
    reserved: Collection[str],
) -> tuple[DirectTool, ExecutionRequest | None, Any] | None:
    """``find_and_admit``'s find and admission without a thread hop: the tools' rows as this
    process holds them for the version its watch heard last (``state.tools_watch``), else for
    the version read on the event loop (``on_loop``), then ``admit_direct_on_loop``. A tool
    not among the heard version's rows is looked for again after a read (added since, its
    notification not read yet). None when any of it needs a thread (the version moved, no
    connection free, a rate limit, a policy, a cached entry): nothing was taken or sent."""

    def find(tools: tuple[list[Any], frozenset[str]]) -> DirectTool:
        return _found(configured(tools[0]), principal=principal, server=server, name=name,
                      naming=naming, reserved=reserved, awaiting=tools[1])  # fmt: skip

    async def held(conn: psycopg.AsyncConnection[Any]) -> tuple[list[Any], frozenset[str]] | None:
        found = await (await conn.execute(TOOLS_VERSION_SQL)).fetchone()
        return None if found is None else tools_held(conn, version=found[0])

    async def found() -> tuple[DirectTool, list[Any]] | None:
        heard = state.tools_watch.heard
        if heard is not None and (tools := tools_held_at(heard[0], version=heard[1])):
            with contextlib.suppress(NotFound):  # else read: added since, perhaps
                return find(tools), tools[0]
        tools = await on_loop(state, held)
        return None if tools is None else (find(tools), tools[0])

    if (tool_and_rows := await found()) is None:
        return None
    tool, known = tool_and_rows
    try:
        request = direct_request(tool, arguments)
        admission = await admit_direct_on_loop(
            state, request=request, principal=principal, known=known
        )
    except (AgentCardsError, ValidationError) as exc:
        return tool, None, exc
    return None if admission is None else (tool, request, admission)


def direct_request(tool: DirectTool, arguments: dict[str, Any]) -> ExecutionRequest:
    """The execution a direct call of ``tool`` is: its one line of code, on the call's
    arguments, scoped to that tool."""
    return ExecutionRequest(code=direct_code(tool.id), args=arguments, tools=[tool.id], learn=False)
