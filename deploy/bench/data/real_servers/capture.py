"""Re-capture tools.json: a real `tools/list` over stdio from each of the five pinned servers,
with each tool's MCP annotations (``readOnlyHint``, ``destructiveHint``…), as the toolhost
stores them.

The bench reads only the committed snapshot, never the servers, so this runs by hand with
the servers installed (the npm ones where the tests install them; mcp-server-git in a venv
of its own, so the project's environment is left alone):

    python3 -m venv /tmp/git-venv && /tmp/git-venv/bin/pip install mcp-server-git==2026.10.19
    TZ=UTC python -m deploy.bench.data.real_servers.capture --npm /root/cache/npm \
        --git /tmp/git-venv/bin/mcp-server-git

filesystem serves, and git opens, a throwaway directory; listing tools touches neither.
mcp-server-time names the machine's time zone in its parameters' descriptions: ``TZ=UTC``
keeps the snapshot's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from deploy.bench.capture import capture_main, list_tools

HERE = Path(__file__).resolve().parent
PACKAGES = {
    "everything": "npm @modelcontextprotocol/server-everything@2026.8.31",
    "filesystem": "npm @modelcontextprotocol/server-filesystem@2026.8.31",
    "memory": "npm @modelcontextprotocol/server-memory@2026.8.31",
    "time": "PyPI mcp-server-time@2026.10.19",
    "git": "PyPI mcp-server-git@2026.10.19",
}


async def capture(npm: Path, git: str, scratch: Path) -> dict[str, Any]:
    """The snapshot: servers → their tools as listed."""
    repo = scratch / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bin_dir = npm / "node_modules" / ".bin"
    commands = {
        "everything": (str(bin_dir / "mcp-server-everything"), []),
        "filesystem": (str(bin_dir / "mcp-server-filesystem"), [str(scratch)]),
        "memory": (str(bin_dir / "mcp-server-memory"), []),
        "time": (shutil.which("mcp-server-time") or "mcp-server-time", []),
        "git": (git, ["--repository", str(repo)]),
    }
    env = {**os.environ, "MEMORY_FILE_PATH": str(scratch / "memory.jsonl")}
    listed = {
        name: await list_tools(StdioServerParameters(command=command, args=args, env=env))
        for name, (command, args) in commands.items()
    }
    return {
        "description": (
            "Tools listed by five published MCP servers (list_tools over stdio, with their "
            "annotations: see capture.py), for bench search's short-request set."
        ),
        "servers": PACKAGES,
        "tools": listed,
    }


def main() -> None:
    capture_main(
        __doc__ or "",
        HERE / "tools.json",
        {"--git": {"help": "the mcp-server-git executable"}},
        capture,
    )


if __name__ == "__main__":
    main()
