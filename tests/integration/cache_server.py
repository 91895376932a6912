"""A real MCP server (stdio, the mcp SDK) for the cache tests: read-only tools whose schema,
failures and answers the test controls through files in ``CACHE_TEST_DIR``.

- ``schema``: when it says ``v2``, ``lookup`` takes an extra ``version`` argument (a schema
  change, seen when the server is restarted: kill the pid in ``pid``).
- ``fail``: while it exists, ``flaky`` fails.
- ``counter`` answers a number that grows with every call, so a cached answer shows.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

DIR = Path(os.environ["CACHE_TEST_DIR"])
READ_ONLY = ToolAnnotations(readOnlyHint=True)
server = MCPServer("cache-test")
_calls = itertools.count(1)


@server.tool(annotations=READ_ONLY)
def counter(key: str) -> dict[str, object]:
    """How many calls this process has answered, with the key."""
    return {"key": key, "n": next(_calls)}


@server.tool(annotations=READ_ONLY)
def other(key: str) -> str:
    """Echo the key (its schema never changes)."""
    return f"other:{key}"


@server.tool(annotations=READ_ONLY)
def flaky(key: str) -> str:
    """Echo the key, or fail while the test's fail file exists."""
    if (DIR / "fail").exists():
        raise ToolError("flaky is failing on purpose")
    return f"flaky:{key}"


@server.tool(annotations=READ_ONLY)
def short(key: str) -> dict[str, object]:
    """Like counter; the tests configure it with a 1 s TTL."""
    return {"key": key, "n": next(_calls)}


if (DIR / "schema").exists() and (DIR / "schema").read_text().strip() == "v2":

    @server.tool(name="lookup", annotations=READ_ONLY)
    def lookup_v2(key: str, version: int = 2) -> str:
        """Look a key up (second schema)."""
        return f"lookup:{key}:v{version}"

else:

    @server.tool(name="lookup", annotations=READ_ONLY)
    def lookup_v1(key: str) -> str:
        """Look a key up (first schema)."""
        return f"lookup:{key}:v1"


if __name__ == "__main__":
    DIR.mkdir(parents=True, exist_ok=True)
    (DIR / "pid").write_text(str(os.getpid()))
    server.run()
