"""`connect --check`: read our entry back from the client's file and connect as that client would.

Same transport, same URL, same headers, same command and environment: an HTTP entry is
opened with the MCP SDK's streamable HTTP client, a stdio entry is started as a child with
only the environment a desktop app gives (HOME and PATH) plus the entry's own. An OAuth
entry carries no secret: the check follows the discovery a client would (the 401's
``WWW-Authenticate`` → the protected-resource metadata → the issuer) and reports it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from deploy.connect.clients import Client

CHECK_TIMEOUT_S = 60.0


@dataclass
class CheckResult:
    """What a client would see: the tools listed, or why it could not list them."""

    ok: bool
    transport: str
    detail: str
    tools: list[str] = field(default_factory=list)


async def check_entry(client: Client, entry: dict[str, Any]) -> CheckResult:
    """Connect with ``entry`` exactly as ``client`` reads it, and list the tools."""
    if client.transport == "stdio":
        return await _check_stdio(entry)
    url = client.entry_url(entry)
    if not url:
        return CheckResult(False, "http", f"the entry has no {client.url_key!r}")
    headers = client.entry_headers(entry)
    if "Authorization" not in headers:
        unauthenticated = await _oauth_discovery(url)
        if unauthenticated is not None:
            return unauthenticated
    try:
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            tools = await session.list_tools()
    except Exception as exc:  # report what the client would hit, whatever it is
        return CheckResult(False, "http", f"{url}: {_reason(exc)}")
    names = [t.name for t in tools.tools]
    return CheckResult(True, "http", f"{url} ({init.server_info.name})", names)


async def _oauth_discovery(url: str) -> CheckResult | None:
    """None when the gateway lets an unauthenticated client in; else what OAuth discovery finds."""
    async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S) as http:
        probe = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        if probe.status_code != 401:
            return None
        challenge = probe.headers.get("WWW-Authenticate", "")
        metadata_url = _challenge_param(challenge, "resource_metadata")
        if not metadata_url:
            return CheckResult(False, "http", f"{url}: 401 without OAuth discovery ({challenge!r})")
        metadata = (await http.get(metadata_url)).json()
    servers = metadata.get("authorization_servers") or []
    if not servers:
        return CheckResult(False, "http", f"{metadata_url} names no authorization server")
    return CheckResult(
        True,
        "http",
        f"{url}: OAuth, the client signs in at {servers[0]} (resource {metadata.get('resource')}); "
        "tools are listed after sign-in",
    )


def _challenge_param(challenge: str, name: str) -> str | None:
    for part in challenge.replace("Bearer ", "", 1).split(","):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip('"')
    return None


async def _check_stdio(entry: dict[str, Any]) -> CheckResult:
    command = entry.get("command")
    if not isinstance(command, str) or not os.path.isabs(command):
        return CheckResult(False, "stdio", f"command {command!r} is not an absolute path")
    # What a desktop app passes its servers: HOME and PATH, then the entry's own env.
    env = {k: os.environ[k] for k in ("HOME", "PATH") if k in os.environ}
    env.update({str(k): str(v) for k, v in (entry.get("env") or {}).items()})
    params = StdioServerParameters(command=command, args=list(entry.get("args") or []), env=env)
    try:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            tools = await session.list_tools()
    except Exception as exc:  # the child's refusal reaches us as a closed stream
        return CheckResult(False, "stdio", f"{command}: {_reason(exc)}")
    names = [t.name for t in tools.tools]
    return CheckResult(
        True, "stdio", f"{command} {' '.join(params.args)} ({init.server_info.name})", names
    )


def _reason(exc: BaseException) -> str:
    """The innermost message of an exception group (anyio wraps the client's failures)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"
