"""In-process tool servers for benchmarks: measure the channel without an MCP server behind it.

Only registered when ``AGENTCARDS_TOOLHOST_BENCH=1`` (see app.py); production toolhosts
never expose them, and they are not synced into Postgres.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from services.toolhost.registry import ToolResult, UnknownTool
from services.toolhost.upstream import CallContext

BENCH_ENV = "AGENTCARDS_TOOLHOST_BENCH"
BENCH_SERVER = "_bench"

LocalTool = Callable[[dict[str, Any]], Awaitable[Any]]


class LocalServer:
    """A named set of async Python functions served like an MCP server's tools."""

    def __init__(self, name: str, tools: dict[str, LocalTool]) -> None:
        self.name = name
        self._tools = tools

    @property
    def state(self) -> str:
        return "ready"

    async def call_tool(
        self, tool: str, args: dict[str, Any], *, context: CallContext | None = None
    ) -> ToolResult:
        """Run the function; an exception becomes a tool error, as ``isError`` would."""
        fn = self._tools.get(tool)
        if fn is None:
            raise UnknownTool(f"{self.name} has no tool {tool!r}")
        try:
            return ToolResult(ok=True, value=await fn(args))
        except Exception as exc:
            return ToolResult(ok=False, error=f"{type(exc).__name__}: {exc}")


async def _echo(args: dict[str, Any]) -> Any:
    return args


def bench_server() -> LocalServer:
    """``_bench:echo`` returns its arguments: the cheapest possible tool."""
    return LocalServer(BENCH_SERVER, {"echo": _echo})
