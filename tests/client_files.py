"""Realistic MCP client files as users have them, and each client's own parser: the connect tests'
starting points (tests/unit/connect, tests/integration/connect)."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import json5

from deploy.connect.clients import CLIENTS

# What each client's file looks like before we touch it: other servers, other settings, and
# comments where the client's parser takes them.
EXISTING: dict[str, str] = {
    "claude-desktop": json.dumps(
        {
            "mcpServers": {
                "filesystem": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/notes"],
                }
            },
            "globalShortcut": "Ctrl+Space",
        },
        indent=2,
    ),
    "claude-code": json.dumps(
        {
            "numStartups": 42,
            "projects": {"/home/me/src/app": {"allowedTools": [], "mcpServers": {}}},
            "mcpServers": {"sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"}},
            "autoUpdates": True,
        },
        indent=2,
    ),
    "vscode": """{
  // servers of this profile
  "servers": {
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
    },
  },
  /* asked for once, kept in VS Code's secret storage */
  "inputs": [{"type": "promptString", "id": "gh-token", "password": true}],
}
""",
    "cursor": json.dumps(
        {"mcpServers": {"playwright": {"command": "npx", "args": ["@playwright/mcp@latest"]}}}
    ),
    "windsurf": json.dumps(
        {"mcpServers": {"zapier": {"serverUrl": "https://actions.zapier.com/mcp/k/sse"}}}
    ),
    "codex": """# Codex settings
model = "gpt-5-codex"
approval_policy = "on-request"

[mcp_servers.docs]  # the docs server
command = "npx"
args = ["-y", "mcp-docs"]

[profiles.fast]
model = "gpt-5-mini"
""",
    "gemini": """{
  // Gemini CLI
  "theme": "Dracula",
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git"]}
  }
}
""",
    "generic": json.dumps(
        {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}
    ),
}
KEPT = {  # the server already there, which must survive
    "claude-desktop": "filesystem",
    "claude-code": "sentry",
    "vscode": "github",
    "cursor": "playwright",
    "windsurf": "zapier",
    "codex": "docs",
    "gemini": "git",
    "generic": "time",
}


def parse_as_client(name: str, text: str) -> dict[str, Any]:
    """The file as the client reads it: strict JSON, JSON with comments, or TOML."""
    client = CLIENTS[name]
    if client.fmt == "toml":
        return tomllib.loads(text)
    if client.fmt == "jsonc":
        return json5.loads(text)
    return json.loads(text)
