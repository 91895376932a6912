"""Direct federation over MCP: each configured server at ``/mcp/servers/<name>``, all at ``/mcp/servers``.

One low-level ``mcp`` SDK ``Server`` (and streamable-HTTP session manager) per endpoint,
made on its first request: servers are read from ``mcp_servers`` (the toolhost syncs
them), so one configured after the gateway started is served too. Tools are listed from
the ``tools`` table with their own names, schemas and annotations, narrowed to the key's
allow-list; a call is an execution of that one tool (``ops/direct.py``), waited on here
with the tool's progress and its server's sampling/elicitation requests passed through,
like ``execute_code``. Resources are the server's own (its URIs unchanged on its endpoint;
``agentcards://<server>/<uri>`` on the aggregate one, as on ``/mcp``).

- ``surface.py``: the ASGI endpoints and their session managers;
- ``server.py``: one endpoint's low-level server, ``endpoint.py`` what its handlers see;
- ``tools.py``, ``resources.py``, ``prompts.py``: the request handlers;
- ``calls.py``: one direct call as an execution, ``results.py`` its answer;
- ``naming.py``: tool naming and ``<server>.<name>``; ``forwarding.py``: a request forwarded;
- ``listeners.py``: who hears of list changes and resource updates (one per app), and
  ``relay.py``: those news from Redis.
"""

from services.gateway.mcp.direct.calls import call_direct
from services.gateway.mcp.direct.listeners import Listeners
from services.gateway.mcp.direct.naming import naming_of, requested
from services.gateway.mcp.direct.resources import subscribe_named, unsubscribe_named
from services.gateway.mcp.direct.results import direct_result
from services.gateway.mcp.direct.surface import DirectSurface
from services.gateway.mcp.direct.tools import aggregate_tools, listed_tool

__all__ = [
    "DirectSurface",
    "Listeners",
    "aggregate_tools",
    "call_direct",
    "direct_result",
    "listed_tool",
    "naming_of",
    "requested",
    "subscribe_named",
    "unsubscribe_named",
]
