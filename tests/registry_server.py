"""An MCP Registry of the tests' own: the registry API's paths and answer shapes over real HTTP,
serving server.json documents as published at the official registry (trimmed to the fields
a client reads), and misbehaving on demand (only ``v0`` paths, garbage)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

OFFICIAL = "io.modelcontextprotocol.registry/official"

# As published at the official registry (the 2025-10-17 / 2025-12-11 server.json schema).
PYPI_EXCEL_LSP = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    "name": "io.github.Brody900/excel-lsp",
    "description": "Excel workbook language server tools over MCP",
    "version": "0.1.0",
    "repository": {"url": "https://github.com/Brody900/excel-lsp", "source": "github"},
    "packages": [
        {
            "registryType": "pypi",
            "identifier": "excel-lsp",
            "version": "0.1.0",
            "runtimeHint": "uvx",
            "packageArguments": [{"type": "positional", "value": "serve"}],
            "transport": {"type": "stdio"},
        }
    ],
}
NPM_BUSINESS_HOTELS = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    "name": "io.github.businesshotelsdeveloper-dot/businesshotels.com",
    "description": "BusinessHotels.com Universal Agentic API providing real-time hotel price verification.",
    "repository": {
        "url": "https://github.com/businesshotelsdeveloper-dot/businesshotels.com",
        "source": "github",
    },
    "version": "2.0.2",
    "packages": [
        {
            "registryType": "npm",
            "identifier": "business-hotels-mcp",
            "version": "2.0.2",
            "transport": {"type": "stdio"},
        }
    ],
}
NPM_GITHUB = {
    "name": "io.github.modelcontextprotocol/server-github",
    "description": "GitHub API integration",
    "version": "0.6.2",
    "packages": [
        {
            "registryType": "npm",
            "identifier": "@modelcontextprotocol/server-github",
            "version": "0.6.2",
            "transport": {"type": "stdio"},
            "environmentVariables": [
                {
                    "name": "GITHUB_PERSONAL_ACCESS_TOKEN",
                    "description": "GitHub PAT",
                    "isRequired": True,
                    "isSecret": True,
                }
            ],
        }
    ],
}
OCI_ARIFOS = {
    "name": "io.github.ariffazil/aaa-mcp",
    "description": "Constitutional AI Governance tools for LLMs.",
    "version": "64.2.0",
    "packages": [
        {"registryType": "oci", "identifier": "docker.io/ariffazil/arifos:64.2.0",
         "transport": {"type": "stdio"}},
        {"registryType": "pypi", "identifier": "arifos", "version": "64.2.0",
         "transport": {"type": "stdio"}},
    ],
}  # fmt: skip
REMOTE_EXA = {
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-10-17/server.schema.json",
    "name": "ai.exa/exa",
    "description": "Fast, intelligent web search and web crawling.",
    "version": "3.1.0",
    "remotes": [{"type": "streamable-http", "url": "https://mcp.exa.ai/mcp"}],
}


class Registry:
    """The documents served (by name, newest last), and how the server misbehaves."""

    def __init__(self, documents: list[dict[str, Any]]) -> None:
        self.versions: dict[str, list[dict[str, Any]]] = {}
        for doc in documents:
            self.publish(doc)
        self.v0_only = False
        self.garbage = False
        self.url = ""

    def publish(self, doc: dict[str, Any]) -> None:
        self.versions.setdefault(doc["name"], []).append(doc)

    def entry(self, doc: dict[str, Any]) -> dict[str, Any]:
        latest = self.versions[doc["name"]][-1] is doc
        meta = {"status": "active", "isLatest": latest, "publishedAt": "2026-10-01T10:00:00Z"}
        return {"server": doc, "_meta": {OFFICIAL: meta}}


def _handler(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            segments = parts.path.strip("/").split("/")
            version = segments[0] if segments else ""
            if version not in ("v0.1", "v0") or (registry.v0_only and version == "v0.1"):
                return self._send(404, {"title": "Not Found", "status": 404})
            if registry.garbage:
                return self._send(200, b"<html>maintenance</html>")
            rest = segments[1:]
            if rest == ["servers"]:
                words = parse_qs(parts.query).get("search", [""])[0].lower()
                items = [
                    registry.entry(docs[-1])
                    for name, docs in registry.versions.items()
                    if words in name.lower()
                ]
                return self._send(200, {"servers": items, "metadata": {"count": len(items)}})
            if len(rest) == 4 and rest[0] == "servers" and rest[2] == "versions":
                docs = registry.versions.get(unquote(rest[1]))
                if not docs:
                    return self._send(404, {"title": "Not Found", "detail": "Server not found"})
                doc = (
                    docs[-1]
                    if rest[3] == "latest"
                    else next((d for d in docs if d["version"] == rest[3]), None)
                )
                if doc is None:
                    return self._send(404, {"title": "Not Found"})
                return self._send(200, registry.entry(doc))
            return self._send(404, {"title": "Not Found"})

    return Handler


@contextmanager
def serving(registry: Registry) -> Iterator[Registry]:
    """The registry on a loopback port (``registry.url``) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(registry))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    registry.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
