"""What a changed mcpServers file asks of the running toolhost: only what changed moves."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from services.toolhost.servers import ServerConfig, parse_servers
from services.toolhost.watch import plan, watch_config


def servers(**entries: dict) -> dict[str, ServerConfig]:
    return parse_servers({"mcpServers": entries})


def test_new_gone_and_changed_servers_move_the_rest_stay() -> None:
    running = servers(a={"command": "a"}, b={"command": "b"}, c={"url": "http://c/mcp"})
    wanted = servers(a={"command": "a"}, c={"url": "http://c2/mcp"}, d={"command": "d"})
    change = plan(running, wanted)
    assert change.stop == ["b", "c"] and change.start == ["c", "d"]
    assert not plan(running, dict(running))


async def test_the_watcher_applies_good_edits_and_skips_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}}}))
    applied: list[list[str]] = []

    async def apply(found: dict[str, ServerConfig]) -> None:
        applied.append(sorted(found))

    task = asyncio.create_task(watch_config(path, apply, every_s=0.02))
    await asyncio.sleep(0.1)
    assert applied == []  # the file as it was at start is not applied again
    path.write_text('{"mcpServers": {"a": {"command": "a"}, }')  # a broken save
    await asyncio.sleep(0.1)
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}, "b": {"command": "bb"}}}))
    for _ in range(50):
        if applied:
            break
        await asyncio.sleep(0.02)
    task.cancel()
    assert applied == [["a", "b"]]
