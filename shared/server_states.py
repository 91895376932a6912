"""The states of a downstream MCP server, one set of names for every surface.

The toolhost writes them (per replica, in ``toolhost_servers`` and its heartbeat), and
``mcp_servers``, ``GET /v1/servers``, ``GET /healthz``, ``agentcards status`` and
``agentcards up`` show the same values:

- ``connecting``: the first attempt since the toolhost started, not answered yet;
- ``ready``: initialized and its tools listed; calls are served;
- ``retrying``: an attempt failed (it timed out, crashed, or the connection died);
  ``last_error`` says why, and the toolhost reconnects with backoff, so the state stays
  ``retrying`` through the wait and the next attempts until one succeeds;
- ``needs_user_authorization``: the server acts for each person with their own OAuth
  connection (docs/upstream-identity.md): nothing is wrong, calls are served for the people
  who connected it, and the others are asked to;
- ``down``: no live toolhost replica serves it (an aggregate only);
- ``removed``: it left the configuration (an aggregate only; the row is kept).
"""

from __future__ import annotations

from enum import StrEnum


class ServerState(StrEnum):
    CONNECTING = "connecting"
    READY = "ready"
    RETRYING = "retrying"
    NEEDS_USER_AUTHORIZATION = "needs_user_authorization"
    DOWN = "down"
    REMOVED = "removed"


# Best first: with several replicas a server is reported in its best state anywhere, since
# calls go to a replica that has it ready; a first attempt may still succeed, a failed one
# has already failed.
RANK: dict[str, int] = {
    state.value: rank
    for rank, state in enumerate(
        (
            ServerState.READY,
            ServerState.NEEDS_USER_AUTHORIZATION,
            ServerState.CONNECTING,
            ServerState.RETRYING,
            ServerState.DOWN,
        )
    )
}
