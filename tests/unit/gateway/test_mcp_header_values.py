"""Header values reach the MCP endpoints without their surrounding whitespace (RFC 9110 §5.5)."""

from __future__ import annotations

from typing import Any

from services.gateway.mcp.headers import TrimmedHeaderValues


async def _seen(path: str, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.update(scope)

    scope = {"type": "http", "path": path, "headers": headers}
    await TrimmedHeaderValues(app)(scope, None, None)  # type: ignore[arg-type]
    return list(seen["headers"])


async def test_spaces_and_tabs_around_a_value_are_dropped_on_the_mcp_endpoints() -> None:
    sent = [(b"mcp-name", b"  get_time \t"), (b"mcp-method", b"tools/call")]
    for path in ("/mcp", "/mcp/servers/time"):
        assert await _seen(path, sent) == [
            (b"mcp-name", b"get_time"),
            (b"mcp-method", b"tools/call"),
        ]


async def test_whitespace_inside_a_value_and_other_paths_are_left_alone() -> None:
    assert await _seen("/mcp", [(b"mcp-name", b" get time ")]) == [(b"mcp-name", b"get time")]
    assert await _seen("/v1/tools", [(b"x-note", b" kept ")]) == [(b"x-note", b" kept ")]
