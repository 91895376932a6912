"""Which results may be reused and for how long, and which runs wrote: pure rules, no I/O.

A result is cached only when something says it repeats. A run is cacheable only when it
succeeded, its stdout was not truncated, it called at least one tool, every call succeeded, and
every tool it called is read-only (annotation or operator override) with a TTL the operator
gave: its own or its server's ``ttl_s`` in the ``mcpServers`` file (``0``: never), else
``AGENTCARDS_CACHE_READ_ONLY_TTL_S`` when the operator set it above its default ``0``.
Read-only alone is not enough: a clock, a search engine, a queue or a sensor is read-only and
answers something new each time. Code that calls no tool is not cached either: nothing says it
does not read the clock or draw a random number. A capability's ``cache_config`` may opt out or
shorten, never in. An entry lives no longer than the shortest TTL of the tools its run called,
whatever the level's own cap.

No declaration a server makes counts. MCP 2026-07-28's ``ttlMs``/``cacheScope`` belong to the
cacheable methods (``tools/list``, ``resources/read`` and the like: ``mcp_types.CacheableResult``);
``tools/call`` is not one, and the mcp SDK drops them from a ``CallToolResult``. The tool
annotations speak of effects, not answers: ``readOnlyHint`` says a call changes nothing,
``idempotentHint`` that repeating it changes nothing more; neither says a second call answers
the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared import tool_ids
from shared.executions.status import ExecutionStatus

NO_TTL = "no ttl_s configured: read-only is not repeatable"
# The operator's blanket TTL for read-only tools (a setting, 0 by default).
READ_ONLY_DEFAULT = "AGENTCARDS_CACHE_READ_ONLY_TTL_S"


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How the cache treats one tool: read-only or not, and the operator's TTL (None = default)."""

    read_only: bool
    ttl_s: int | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a run: ``ok`` is None when it was lost (it may have happened)."""

    tool: str
    ok: bool | None


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a run's result may be stored, why not, and for how long."""

    cacheable: bool
    reason: str
    ttl_s: int = 0
    tools_used: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()


def tool_policy(
    *, annotations: Mapping[str, Any] | None, override: Mapping[str, Any] | None
) -> ToolPolicy:
    """The operator's ``read_only`` wins over ``readOnlyHint``; only an explicit ``true`` counts."""
    override = override or {}
    read_only = override.get("read_only")
    if read_only is None:
        read_only = (annotations or {}).get("readOnlyHint") is True
    ttl = override.get("ttl_s")
    return ToolPolicy(read_only=bool(read_only), ttl_s=int(ttl) if ttl is not None else None)


def decide(
    *,
    status: str,
    stdout_truncated: bool,
    calls: Iterable[Call],
    policies: Mapping[str, ToolPolicy],
    default_ttl_s: int,
    read_only_ttl_s: int,
    capability_config: Mapping[str, Any] | None = None,
) -> Decision:
    """Apply the safety rules to one finished run; ``default_ttl_s`` is the level's cap,
    ``read_only_ttl_s`` a read-only tool's TTL when its server's entry gives none (0: none)."""
    if status != ExecutionStatus.SUCCEEDED:
        return Decision(False, f"the run ended {status}")
    if stdout_truncated:
        return Decision(False, "the run's stdout was truncated")
    config = capability_config or {}
    if config.get("enabled") is False or config.get("ttl_s") == 0:
        return Decision(False, "the capability's cache_config opts out")
    ttl = default_ttl_s
    used: list[str] = []
    calls = list(calls)
    if not calls:
        return Decision(False, "the run called no tool: nothing says its result repeats")
    for call in calls:
        if call.ok is not True:
            return Decision(False, f"tool call {call.tool} failed or was lost")
        policy = policies.get(call.tool)
        if policy is None:
            return Decision(False, f"tool {call.tool} is unknown")
        if not policy.read_only:
            return Decision(False, f"tool {call.tool} is not read-only")
        if policy.ttl_s == 0:
            return Decision(False, f"tool {call.tool} is configured ttl_s: 0")
        tool_ttl = policy.ttl_s if policy.ttl_s is not None else read_only_ttl_s
        if tool_ttl <= 0:
            return Decision(False, f"tool {call.tool} has {NO_TTL}")
        ttl = min(ttl, tool_ttl)
        if call.tool not in used:
            used.append(call.tool)
    if isinstance(config.get("ttl_s"), int):
        ttl = min(ttl, int(config["ttl_s"]))
    if ttl <= 0:
        return Decision(False, "caching is off (TTL 0)")
    return Decision(True, "cacheable", ttl, tuple(used), tuple(sorted(servers_of(used))))


def tool_cache(policy: ToolPolicy, *, read_only_ttl_s: int) -> dict[str, Any]:
    """What ``/v1/tools`` and ``agentcards up`` say of a tool: ``{"cached", "ttl_s", "why"}``
    (``decide``'s rule for one call of it)."""
    if not policy.read_only:
        return {"cached": False, "ttl_s": 0, "why": "not read-only"}
    if policy.ttl_s == 0:
        return {"cached": False, "ttl_s": 0, "why": "operator ttl_s: 0"}
    if policy.ttl_s is not None:
        return {"cached": True, "ttl_s": policy.ttl_s, "why": "operator ttl_s"}
    if read_only_ttl_s > 0:
        return {"cached": True, "ttl_s": read_only_ttl_s, "why": READ_ONLY_DEFAULT}
    return {"cached": False, "ttl_s": 0, "why": NO_TTL}


def written_servers(calls: Iterable[Call], policies: Mapping[str, ToolPolicy]) -> set[str]:
    """Servers a run may have written to: a call to a tool that is not read-only (or unknown)
    that did not certainly fail (a lost call may have happened)."""
    servers = set()
    for call in calls:
        policy = policies.get(call.tool)
        if (policy is None or not policy.read_only) and call.ok is not False:
            servers |= servers_of([call.tool])
    return servers


def writable_servers(policies: Mapping[str, ToolPolicy]) -> set[str]:
    """Servers with a tool that is not read-only: what a run with no trace (cancelled, lost)
    may have written to."""
    return servers_of(tool for tool, policy in policies.items() if not policy.read_only)


def servers_of(tools: Iterable[str]) -> set[str]:
    """The servers of ``server:tool`` ids (malformed ids are skipped)."""
    servers = set()
    for tool in tools:
        try:
            servers.add(tool_ids.parse(tool)[0])
        except ValueError:
            continue
    return servers
