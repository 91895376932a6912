"""A missing, unknown or revoked key on /mcp: the official SDK client raises our message.

A real gateway process with keys, and the SDK's streamable HTTP client: the 401 carries a
JSON-RPC error (our message, our body as ``data``) and ``WWW-Authenticate``, so the client
does not fall back to "Server returned an error response".
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from deploy.launcher.embedded import free_port
from shared.auth.store import revoke_key
from shared.config import Settings
from shared.db import connect
from tests.harness import spawn
from tests.stack import settings_env

MakeKey = Callable[..., tuple[str, dict[str, str]]]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def keyed_gateway(
    settings: Settings, make_key: MakeKey, tmp_path: Path
) -> Iterator[tuple[str, dict[str, str]]]:
    """A gateway process started once a key exists; its URL and a revoked key's header."""
    key_id, revoked = make_key("tenant-a")
    with connect(settings.database_url or "") as conn:
        revoke_key(conn, key_id=key_id)
        conn.commit()
    make_key("tenant-a")  # an active key: the gateway requires one
    port = free_port()
    log = tmp_path / "gateway.log"
    env = settings_env(settings) | {"AGENTCARDS_GATEWAY_PORT": str(port)}
    proc = spawn(  # stopped at exit, and dies with pytest, if the test is cut short
        [sys.executable, "-m", "services.gateway"],
        env=env, cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                httpx.get(f"{url}/healthz", timeout=2)  # any answer: serving (no worker here)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail(log.read_text()[-3000:])
        yield url, revoked
    finally:
        proc.terminate()
        proc.wait(30)


async def _initialize(url: str, headers: dict[str, str]) -> MCPError:
    """What the SDK raises from ``initialize`` (out of the task groups that wrap it)."""
    try:
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
    except BaseException as exc:  # the MCPError, wrapped in task groups
        found: BaseException = exc
        while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
            found = found.exceptions[0]
        assert isinstance(found, MCPError), repr(exc)
        return found
    raise AssertionError("initialize succeeded without a valid key")


CASES = [
    ({}, "this gateway requires an API key: send `Authorization: Bearer <key>`"),
    ({"Authorization": "Bearer ack_" + "z" * 43}, "the API key is unknown or revoked"),
    ({"Authorization": "Basic abc"}, "the Authorization header must be `Bearer <API key>`"),
    (None, "the API key is unknown or revoked"),  # the revoked key
]


async def test_the_sdk_client_raises_our_message(
    keyed_gateway: tuple[str, dict[str, str]],
) -> None:
    url, revoked = keyed_gateway
    for headers, message in CASES:
        error = await _initialize(url, revoked if headers is None else headers)
        assert message in str(error), (headers, str(error))
        assert error.data["type"] == "unauthorized" and message in error.data["message"]


def test_the_401_keeps_its_status_and_www_authenticate(
    keyed_gateway: tuple[str, dict[str, str]],
) -> None:
    url, _ = keyed_gateway
    answer = httpx.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        headers={"accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["data"]["type"] == "unauthorized"
    rest = httpx.get(f"{url}/v1/tools")  # REST keeps its envelope
    assert rest.status_code == 401 and rest.json()["error"]["type"] == "unauthorized"
