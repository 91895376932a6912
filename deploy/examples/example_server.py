"""Example MCP server (stdio by default) with deterministic tools for the demo and the tests.

Run it with ``python -m deploy.examples.example_server`` (add ``--http PORT`` for
streamable HTTP). Environment:

- ``EXAMPLE_NOTES_DIR``: keep notes in ``notes.json`` under this folder (else in memory).
- ``EXAMPLE_SAMPLE_DIR``: the folder ``list_files``/``read_file`` serve (default ``sample/``).
- ``EXAMPLE_TEST_TOOLS=1``: also expose ``crash`` and ``add_extra_tool``, which kill the
  process and change the tool list; tests use them, the demo does not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

SAMPLE_DIR = Path(os.environ.get("EXAMPLE_SAMPLE_DIR") or Path(__file__).parent / "sample")
MAX_READ_BYTES = 64 << 10  # the sample files are tiny; refuse anything bigger
MAX_SLOW_S = 600.0

server = MCPServer(
    "agentcards-example",
    instructions="Deterministic example tools: notes, a calculator, a sample-file reader.",
)


class NoteStore:
    """Notes kept in memory, or in one JSON file when a folder is configured."""

    def __init__(self, folder: Path | None) -> None:
        self._path = folder / "notes.json" if folder else None
        self._lock = threading.Lock()
        self._notes: list[dict[str, Any]] = []
        if self._path and self._path.exists():
            self._notes = json.loads(self._path.read_text())

    def add(self, title: str, body: str) -> dict[str, Any]:
        with self._lock:
            note = {"id": len(self._notes) + 1, "title": title, "body": body}
            self._notes.append(note)
            if self._path:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self._path.with_suffix(".tmp")
                tmp.write_text(json.dumps(self._notes))
                tmp.replace(self._path)  # atomic: a crash never leaves half a file
            return note

    def all(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._notes)


_notes_dir = os.environ.get("EXAMPLE_NOTES_DIR")
notes = NoteStore(Path(_notes_dir) if _notes_dir else None)


@server.tool()
def add_note(title: str, body: str) -> dict[str, Any]:
    """Save a note and return it with its id."""
    if not title.strip():
        raise ToolError("title must not be empty")
    return notes.add(title, body)


@server.tool()
def list_notes() -> list[dict[str, Any]]:
    """List every saved note (id, title, body), oldest first."""
    return notes.all()


@server.tool()
def get_note(id: int) -> dict[str, Any]:
    """Return one note by id."""
    for note in notes.all():
        if note["id"] == id:
            return note
    raise ToolError(f"no note with id {id}")


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divide a by b; dividing by zero is a tool error."""
    if b == 0:
        raise ToolError("division by zero")
    return a / b


@server.tool()
def list_files() -> list[str]:
    """List the files in the sample folder."""
    return sorted(p.name for p in SAMPLE_DIR.iterdir() if p.is_file())


@server.tool()
def read_file(name: str) -> str:
    """Read one text file from the sample folder (no other path is reachable)."""
    root = SAMPLE_DIR.resolve()
    path = (root / name).resolve()
    if path.parent != root or not path.is_file():
        raise ToolError(f"no file {name!r} in the sample folder (see list_files)")
    if path.stat().st_size > MAX_READ_BYTES:
        raise ToolError(f"{name!r} is larger than {MAX_READ_BYTES} bytes")
    return path.read_text(errors="replace")


@server.tool()
def fail(message: str = "this tool always fails") -> str:
    """Always fail with a tool error (for testing error handling)."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep for the given number of seconds, then answer (for testing timeouts)."""
    if not 0 <= seconds <= MAX_SLOW_S:
        raise ToolError(f"seconds must be between 0 and {MAX_SLOW_S}")
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


def _register_test_tools() -> None:
    @server.tool()
    def crash(exit_code: int = 1) -> str:
        """Kill this server process mid-call (for testing reconnects)."""
        os._exit(exit_code)

    @server.tool()
    async def add_extra_tool(ctx: Context) -> str:
        """Add a tool named 'extra' and announce it with tools/list_changed."""

        def extra(text: str) -> str:
            """Echo the text back (added at run time)."""
            return text

        server.add_tool(extra, name="extra")
        await ctx.notify_tools_changed()  # 2026-07-28 clients: their subscriptions/listen
        await ctx.session.send_tool_list_changed()  # 2025-11-25 sessions
        return "added"

    @server.tool()
    async def add_extra_prompt(ctx: Context) -> str:
        """Add a prompt named 'extra' and announce it with prompts/list_changed."""

        def extra(topic: str) -> str:
            """Ask about a topic (added at run time)."""
            return f"Tell me about {topic}."

        server.prompt(name="extra")(extra)
        await ctx.notify_prompts_changed()
        await ctx.session.send_prompt_list_changed()
        return "added"

    @server.tool()
    async def log_and_echo(text: str, ctx: Context) -> str:
        """Log the text at info level, then return it (for testing log relaying)."""
        await ctx.info(f"echoing {text}")
        return text


if os.environ.get("EXAMPLE_TEST_TOOLS") == "1":
    _register_test_tools()


def main() -> None:
    """Serve over stdio, or over streamable HTTP with ``--http PORT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT")
    parser.add_argument("--host", default="127.0.0.1")
    ns = parser.parse_args()
    if ns.http:
        server.run("streamable-http", host=ns.host, port=ns.http)
    else:
        server.run()


if __name__ == "__main__":
    main()
