"""Snapshots of published MCP servers' tools for the bench (``data/<set>/capture.py``): a real
`tools/list` over stdio, with each tool's annotations, as the toolhost stores them."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import PaginatedRequestParams


async def list_tools(params: StdioServerParameters) -> list[dict[str, Any]]:
    """Every tool the server lists (following pagination cursors), with its annotations."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(
                params=PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            for t in page.tools:
                entry: dict[str, Any] = {
                    "name": t.name,
                    "description": t.description or "",
                    "inputSchema": t.input_schema,
                }
                if t.annotations is not None:
                    entry["annotations"] = t.annotations.model_dump(
                        by_alias=True, exclude_none=True
                    )
                tools.append(entry)
            cursor = page.next_cursor
            if not cursor:
                return tools


def write_snapshot(snapshot: dict[str, Any], out: Path) -> None:
    """Write tools.json and print how many tools each server listed."""
    out.write_text(json.dumps(snapshot, indent=1, ensure_ascii=False) + "\n")
    counts = {name: len(tools) for name, tools in snapshot["tools"].items()}
    print(json.dumps({"tools": sum(counts.values()), "per_server": counts}))


def capture_main(
    doc: str,
    out: Path,
    options: dict[str, dict[str, Any]],
    capture: Callable[..., Coroutine[Any, Any, dict[str, Any]]],
) -> None:
    """A set's command line: ``--npm`` (the npm prefix), the set's own required ``options``
    (passed to ``capture`` in order, after the prefix) and ``--out``; the servers are listed
    from a scratch folder and the snapshot written."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--npm", type=Path, required=True, help="npm prefix with the servers")
    for flag, kwargs in options.items():
        parser.add_argument(flag, required=True, **kwargs)
    parser.add_argument("--out", type=Path, default=out)
    ns = vars(parser.parse_args())
    values = [ns[flag.lstrip("-").replace("-", "_")] for flag in options]
    with tempfile.TemporaryDirectory() as scratch:
        snapshot = asyncio.run(capture(ns["npm"], *values, Path(scratch)))
    write_snapshot(snapshot, ns["out"])
