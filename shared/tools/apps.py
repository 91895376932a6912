"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension, ext-apps spec 2026-01-26) as the
toolhost declares it downstream and the gateway passes it on (docs/mcp-apps.md).

A server with Apps binds a tool to a UI: the tool's ``_meta.ui.resourceUri`` names a ``ui://``
resource, an HTML document served as ``text/html;profile=mcp-app``. The toolhost keeps each
tool's Apps part of ``_meta`` (``tool_apps_meta``) beside the server's answer to its
handshake; the gateway shows it only to a client that declared the extension itself.
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

UI_SCHEME: Final = "ui://"
# The flat key the spec deprecates in favour of ``_meta.ui.resourceUri`` (still read by hosts).
LEGACY_URI_KEY: Final = "ui/resourceUri"

# What the toolhost declares under ``capabilities.extensions`` to every downstream server.
CLIENT_EXTENSIONS: Final[dict[str, dict[str, Any]]] = {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}

__all__ = [
    "APP_MIME_TYPE",
    "CLIENT_EXTENSIONS",
    "EXTENSION_ID",
    "LEGACY_URI_KEY",
    "UI_SCHEME",
    "offers_apps",
    "tool_apps_meta",
]


def tool_apps_meta(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """The Apps part of a tool's ``_meta`` (``ui`` and the deprecated ``ui/resourceUri``),
    or None when the tool has no UI."""
    if not meta:
        return None
    kept: dict[str, Any] = {}
    if isinstance(meta.get("ui"), dict):
        kept["ui"] = meta["ui"]
    if isinstance(meta.get(LEGACY_URI_KEY), str):
        kept[LEGACY_URI_KEY] = meta[LEGACY_URI_KEY]
    return kept or None


def offers_apps(server_info: dict[str, Any] | None) -> bool:
    """Whether a server offers Apps, by what the toolhost keeps of it (``server_info``): it
    declares the extension, or a tool of it has a UI (``toolsUi``; ``list_servers`` reads the
    same in SQL)."""
    info = server_info or {}
    extensions = (info.get("capabilities") or {}).get("extensions") or {}
    return EXTENSION_ID in extensions or bool(info.get("toolsUi"))
