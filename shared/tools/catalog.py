"""What a tool name in agent code means: the real id, out of scope, or unknown with the nearest names.

Agent code writes ``mcp.my_server.get_sum`` for the tool ``my-server:get-sum`` (see
``tool_ids.python_name``: ``-`` and ``.`` become ``_``) or the exact name by subscript,
``mcp["my-server"]["get-sum"]``. The bridge resolves both here before it checks the scope,
so the trace, the toolhost and the learned graph only ever see real ids. Pure and stdlib only.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from shared import tool_ids
from shared.errors import ErrorType, error_dict

MAX_SUGGESTIONS = 5
# difflib ratio below which a name is not offered as "did you mean": 0.5 keeps typos and
# near-synonyms (get_time / get_current_time) and drops unrelated names.
SUGGESTION_CUTOFF = 0.5


@dataclass(frozen=True, slots=True)
class ToolCatalog:
    """The ids an execution may call (``granted``) among those that exist (``known``).

    ``known`` None means nothing is known beyond the granted ids: any other name is
    refused as ``tool_not_allowed`` (the bridge's behaviour without a tool registry).
    ``awaiting``: servers whose tools are not known until a person connects them; a call to
    one of theirs goes ahead (the toolhost answers ``authorization_required`` with a link).
    """

    granted: frozenset[str]
    known: frozenset[str] | None = None
    _aliases: dict[str, str] = field(default_factory=dict, repr=False)
    # the awaiting servers by their name and their Python name -> the real name
    _awaiting: dict[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        granted: Iterable[str],
        known: Iterable[str] | None = None,
        awaiting: Iterable[str] = (),
    ) -> ToolCatalog:
        """A catalog with its Python-name aliases; granted ids win an alias over other known ones."""
        granted_set = frozenset(granted)
        known_set = None if known is None else frozenset(known) | granted_set
        aliases: dict[str, str] = {}
        for tool_id in [*sorted(granted_set), *sorted((known_set or set()) - granted_set)]:
            aliases.setdefault(tool_ids.python_id(tool_id), tool_id)
        waiting: dict[str, str] = {}
        for server in sorted(awaiting):
            waiting.setdefault(server, server)
            waiting.setdefault(tool_ids.python_name(server), server)
        return cls(granted_set, known_set, aliases, waiting)

    def resolve(self, requested: str) -> tuple[str, dict[str, Any] | None]:
        """(real id, None) when the call may go ahead, else (the id as resolved, a structured refusal)."""
        if not tool_ids.is_tool_id(requested):
            return requested, error_dict(
                ErrorType.TOOL_NOT_ALLOWED,
                f"tool {requested[:200]!r} is not granted to this execution: {tool_ids.TOOL_ID_RULE}",
            )
        tool = requested
        if tool not in self.granted and (self.known is None or tool not in self.known):
            tool = self._aliases.get(tool_ids.python_id(requested), requested)
        if tool in self.granted:
            return tool, None
        if self.known is not None and tool not in self.known:
            server, name = tool_ids.parse(tool)
            if server in self._awaiting:  # its tools are not known yet: the toolhost answers
                return tool_ids.make(self._awaiting[server], name), None
        if self.known is None:
            return tool, error_dict(
                ErrorType.TOOL_NOT_ALLOWED, f"tool {tool!r} is not granted to this execution"
            )
        if tool in self.known:
            return tool, error_dict(
                ErrorType.TOOL_NOT_ALLOWED,
                f"tool {tool!r} exists but is not in this execution's tool scope "
                "(the request's `tools` and the API key's allow-list)",
            )
        return tool, self._unknown(tool)

    def _unknown(self, tool: str) -> dict[str, Any]:
        known = sorted(self.known or ())
        server, name = tool_ids.parse(tool)
        servers = sorted({tool_ids.parse(t).server for t in known})
        wanted = tool_ids.python_name(server)
        same_server = [t for t in known if tool_ids.python_name(tool_ids.parse(t).server) == wanted]
        if same_server:
            real_server = tool_ids.parse(same_server[0]).server
            what = f"MCP server {real_server!r} has no tool {name!r}"
        else:
            listed = ", ".join(servers[:20]) or "none"
            what = f"no MCP server named {server!r} (servers: {listed})"
        suggestions = nearest(tool, known) or same_server[:MAX_SUGGESTIONS]
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        return error_dict(
            ErrorType.UNKNOWN_TOOL,
            f"unknown tool {tool!r}: {what}{hint} (find tools with search_tools)",
            suggestions=suggestions or None,
        )


def nearest(tool: str, known: Iterable[str], *, n: int = MAX_SUGGESTIONS) -> list[str]:
    """The known ids closest to ``tool`` (compared as Python names), best first."""
    by_python: dict[str, str] = {}
    for tool_id in known:
        by_python.setdefault(tool_ids.python_id(tool_id), tool_id)
    close = difflib.get_close_matches(
        tool_ids.python_id(tool), list(by_python), n=n, cutoff=SUGGESTION_CUTOFF
    )
    return [by_python[c] for c in close]
