"""The ``ttlMs``/``cacheScope`` hints (MCP 2026-07-28, SEP-2549) every MCP endpoint puts on its
list, read and ``server/discover`` results, derived from the gateway's own cache rules.

- Every answer is ``private``: what a caller sees depends on its key (tool allow-lists,
  the mode, its tenant's capabilities and servers' resources), so a cached answer must never
  be reused under another authorization.
- Lists (tools, prompts, resources, templates) and ``server/discover`` stay fresh for
  ``LIST_TTL_MS``: they change only when a server or capability does, and a client that
  holds a session is told so at once (``notifications/*/list_changed``).
- ``resources/read`` is ``0`` (stale at once): a resource is a server's live state (the
  gateway caches only read-only tool results, never resources), and subscribers are told of
  an update.

The SDK fills these on 2026-07-28 results only where a handler left them unset.
"""

from __future__ import annotations

from typing import Final

from mcp.server.caching import CacheableMethod, CacheHint

LIST_TTL_MS: Final = 60_000

CACHE_HINTS: Final[dict[CacheableMethod, CacheHint]] = {
    "server/discover": CacheHint(ttl_ms=LIST_TTL_MS, scope="private"),
    "tools/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private"),
    "prompts/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private"),
    "resources/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private"),
    "resources/templates/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private"),
    "resources/read": CacheHint(ttl_ms=0, scope="private"),
}
