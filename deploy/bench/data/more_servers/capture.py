"""Re-capture tools.json: a real `tools/list` over stdio from each pinned MCP server.

The bench reads only the committed snapshot, never the servers, so this runs by hand and
needs the packages installed first (npm and a separate venv, so the project's own
environment is left alone; puppeteer's browser is not needed to list its tools). Each
PyPI server has a venv of its own: mcp-server-sqlite 2025.4.25 fails to start on mcp 2.x
(it calls Server.list_resources, gone there), so it gets the mcp 1.x it was released on:

    mkdir -p /tmp/set3-npm && cd /tmp/set3-npm && npm init -y
    PUPPETEER_SKIP_DOWNLOAD=1 npm install @modelcontextprotocol/server-github@2025.4.8 \
        @modelcontextprotocol/server-gitlab@2025.4.25 \
        @modelcontextprotocol/server-slack@2025.4.25 \
        @modelcontextprotocol/server-puppeteer@2025.5.12 \
        @modelcontextprotocol/server-brave-search@0.6.2 \
        @modelcontextprotocol/server-google-maps@0.6.2
    python3 -m venv /tmp/set3-venvs/fetch && python3 -m venv /tmp/set3-venvs/sqlite
    /tmp/set3-venvs/fetch/bin/pip install mcp-server-fetch==2026.10.24
    /tmp/set3-venvs/sqlite/bin/pip install mcp-server-sqlite==2025.4.25 'mcp<2'
    python -m deploy.bench.data.more_servers.capture --npm /tmp/set3-npm --venvs /tmp/set3-venvs

The API keys are dummies: these servers only check that a key is set when they start,
and listing tools calls no remote API.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from deploy.bench.capture import capture_main, list_tools

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Server:
    """One pinned server: its short name in tool ids, package, and how it is started."""

    name: str
    package: str  # "npm NAME@VERSION" or "PyPI NAME@VERSION", as tools.json records it
    command: str  # an executable under node_modules/.bin or the venv's bin
    runtime: str  # npm | pypi
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


SERVERS = (
    Server(
        "github",
        "npm @modelcontextprotocol/server-github@2025.4.8",
        "mcp-server-github",
        "npm",
        env=(("GITHUB_PERSONAL_ACCESS_TOKEN", "dummy"),),
    ),
    Server(
        "gitlab",
        "npm @modelcontextprotocol/server-gitlab@2025.4.25",
        "mcp-server-gitlab",
        "npm",
        env=(("GITLAB_PERSONAL_ACCESS_TOKEN", "dummy"),),
    ),
    Server(
        "slack",
        "npm @modelcontextprotocol/server-slack@2025.4.25",
        "mcp-server-slack",
        "npm",
        env=(("SLACK_BOT_TOKEN", "xoxb-dummy"), ("SLACK_TEAM_ID", "T0000000")),
    ),
    Server(
        "puppeteer",
        "npm @modelcontextprotocol/server-puppeteer@2025.5.12",
        "mcp-server-puppeteer",
        "npm",
    ),
    Server(
        "brave-search",
        "npm @modelcontextprotocol/server-brave-search@0.6.2",
        "mcp-server-brave-search",
        "npm",
        env=(("BRAVE_API_KEY", "dummy"),),
    ),
    Server(
        "google-maps",
        "npm @modelcontextprotocol/server-google-maps@0.6.2",
        "mcp-server-google-maps",
        "npm",
        env=(("GOOGLE_MAPS_API_KEY", "dummy"),),
    ),
    Server("fetch", "PyPI mcp-server-fetch@2026.10.24", "mcp-server-fetch", "pypi"),
    Server("sqlite", "PyPI mcp-server-sqlite@2025.4.25", "mcp-server-sqlite", "pypi"),
)


def executable(server: Server, npm: Path, venvs: Path) -> str:
    """Where the server's start script was installed (a PyPI server: in its own venv)."""
    root = npm / "node_modules" / ".bin" if server.runtime == "npm" else venvs / server.name / "bin"
    return str(root / server.command)


async def capture(npm: Path, venvs: Path, scratch: Path) -> dict[str, Any]:
    """The snapshot, in real_servers/tools.json's shape."""
    listed: dict[str, list[dict[str, Any]]] = {}
    for server in SERVERS:
        # sqlite opens (and creates) the database it will serve: a throwaway one here.
        args = ["--db-path", str(scratch / "capture.db")] if server.name == "sqlite" else []
        params = StdioServerParameters(
            command=executable(server, npm, venvs),
            args=[*server.args, *args],
            env={**os.environ, **dict(server.env)},
        )
        listed[server.name] = await list_tools(params)
    return {
        "description": (
            "Tools listed by eight published MCP servers not used in real_servers "
            "(list_tools over stdio, see capture.py), for bench search's held-out "
            "short-request set."
        ),
        "servers": {s.name: s.package for s in SERVERS},
        "tools": listed,
    }


def main() -> None:
    capture_main(
        __doc__ or "",
        HERE / "tools.json",
        {"--venvs": {"type": Path, "help": "one venv per PyPI server"}},
        capture,
    )


if __name__ == "__main__":
    main()
