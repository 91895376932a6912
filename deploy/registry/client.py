"""The MCP Registry API, read: search servers, fetch one server's latest server.json.

Any registry serving the API at ``AGENTCARDS_REGISTRY_URL`` works, the official one or a
private one: the ``v0.1`` paths first, the ``v0`` paths where a registry serves only those
(a 404 on ``v0.1`` then an answer on ``v0``). Answers are
``{"servers": [{"server": <server.json>, "_meta": {...}}], "metadata": {...}}`` for a list
and ``{"server": ..., "_meta": ...}`` for one server; anything else is refused as garbage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from deploy.registry.server_json import ServerJson, parse_server_json
from shared.errors import DependencyError, NotFound

TIMEOUT_S = 20.0
VERSIONS = ("v0.1", "v0")
OFFICIAL_META = "io.modelcontextprotocol.registry/official"


@dataclass(frozen=True)
class Listing:
    """One server as a registry lists it."""

    server: ServerJson
    status: str | None
    is_latest: bool


class RegistryClient:
    """Reads one registry; every failure is a DependencyError or NotFound naming the registry."""

    def __init__(self, base_url: str, *, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(timeout=TIMEOUT_S, transport=transport, follow_redirects=True)

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        last = None
        for version in VERSIONS:
            url = f"{self.base_url}/{version}{path}"
            try:
                response = self._http.get(url, params=params)
            except httpx.HTTPError as exc:
                raise DependencyError(
                    f"the MCP registry at {self.base_url} is unreachable: {exc}"
                ) from exc
            if response.status_code == 404:
                last = response
                continue
            if response.status_code >= 400:
                raise DependencyError(
                    f"the MCP registry at {self.base_url} answered {response.status_code} "
                    f"for {url}: {response.text[:200]}"
                )
            try:
                return response.json()
            except ValueError as exc:
                raise DependencyError(
                    f"the MCP registry at {self.base_url} answered {url} with something that "
                    "is not JSON"
                ) from exc
        assert last is not None
        raise NotFound(f"not found at the MCP registry {self.base_url}: {path}")

    def search(self, words: str, *, limit: int = 30) -> list[Listing]:
        """Servers whose name matches ``words``, latest versions only."""
        data = self._get("/servers", {"search": words, "version": "latest", "limit": limit})
        items = data.get("servers") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise DependencyError(
                f"the MCP registry at {self.base_url} answered a search without a "
                "'servers' list (not the registry API)"
            )
        return [self._listing(item) for item in items]

    def latest(self, name: str) -> Listing:
        """The newest version of the server called ``name`` (``io.github.owner/server``)."""
        try:
            data = self._get(f"/servers/{quote(name, safe='')}/versions/latest")
        except NotFound:
            raise NotFound(
                f"no server named {name!r} at the MCP registry {self.base_url} "
                f"(`agentcards servers search` finds names)"
            ) from None
        return self._listing(data)

    def _listing(self, item: Any) -> Listing:
        if not isinstance(item, dict) or not isinstance(item.get("server"), dict):
            raise DependencyError(
                f"the MCP registry at {self.base_url} answered an entry without a 'server' "
                "object (not the registry API)"
            )
        meta = (item.get("_meta") or {}).get(OFFICIAL_META) or {}
        server = parse_server_json(item["server"], source="the registry's entry")
        return Listing(server, meta.get("status"), bool(meta.get("isLatest", True)))
