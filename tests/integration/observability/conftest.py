"""One whole stack (`agentcards up`'s processes, by the launcher's harness) in JSON-log mode,
driven once through everything the metrics count; the tests read what it left behind."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families
from psycopg.rows import dict_row
from pydantic import SecretStr

from deploy.launcher.harness import StackHandle, temporary_stack
from shared.auth.store import issue_key
from shared.broker import make_celery
from shared.queues import TaskName
from tests.integration.mcp_servers import example_server, time_server, write_config

TENANT = "acme"
FLOWER_USER, FLOWER_PASSWORD = "obs", "flower-test-password"

ADD_THEN_MULTIPLY = """
total = await mcp.example.add(a=args["a"], b=args["b"])
return await mcp.example.multiply(a=total, b=args["b"])
"""
MULTIPLY_THEN_DIVIDE = """
product = await mcp.example.multiply(a=args["a"], b=args["b"])
return await mcp.example.divide(a=product, b=args["b"])
"""
DIVIDE = 'return await mcp.example.divide(a=args["a"], b=args["b"])'
WHAT_TIME = 'return (await mcp.time.get_current_time(timezone="UTC"))["timezone"]'
FAILING_TOOL = """
try:
    await mcp.example.fail(message="expected")
except Exception:
    pass
return "carried on"
"""
SPIN = "while True:\n    pass"


@dataclass
class Scenario:
    """What the drive did: its ids, and every /metrics scrape taken along the way."""

    handle: StackHandle
    key: str
    other_key: str
    learned_id: str = ""  # the add-then-multiply execution (tool calls, learned)
    capability_id: str = ""
    scrapes: list[str] = field(default_factory=list)

    @property
    def logs(self) -> Path:
        return self.handle.settings.run_dir / "logs"

    def client(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.handle.gateway_url,
            headers={"authorization": f"Bearer {key or self.key}"},
            timeout=120,
        )

    def db(self) -> psycopg.Connection[dict[str, Any]]:
        return psycopg.connect(self.handle.settings.database_url or "", row_factory=dict_row)

    def scrape(self) -> dict[str, list[Any]]:
        """Scrape /metrics (loopback needs no key); the text is kept for the run's maximum."""
        text = httpx.get(f"{self.handle.gateway_url}/metrics", timeout=30).text
        self.scrapes.append(text)
        return {f.name: f.samples for f in text_string_to_metric_families(text)}

    def flower(self, path: str) -> Any:
        url = f"http://127.0.0.1:{self.handle.settings.flower_port}{path}"
        response = httpx.get(url, auth=(FLOWER_USER, FLOWER_PASSWORD), timeout=30)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """The stack, started once, driven through search, match, execute, cache hits, suggestions,
    learning, promotion, pruning, a sandbox limit kill and a queue backlog."""
    tmp = tmp_path_factory.mktemp("obs")
    # The example server's arithmetic is pure: its results may be cached.
    example = {**example_server(tmp), "agentcards": {"cache": {"read_only": True, "ttl_s": 600}}}
    config = write_config(tmp / "mcp.json", {"example": example, "time": time_server()})
    # Its own stack, as `agentcards up` runs it: JSON logs, Flower with a password, pruning on.
    with temporary_stack(
        mcp_config=config,
        timeout_s=300,
        env="test",
        log_format="json",
        pruning_enabled=True,
        flower_basic_auth=SecretStr(f"{FLOWER_USER}:{FLOWER_PASSWORD}"),
    ) as handle:
        with psycopg.connect(handle.settings.database_url or "", row_factory=dict_row) as conn:
            _, key = issue_key(conn, tenant_id=TENANT)
            _, other_key = issue_key(conn, tenant_id="bystander")
        run = Scenario(handle=handle, key=key, other_key=other_key)
        _drive(run)
        yield run


def _drive(run: Scenario) -> None:
    with run.client() as client:

        def execute(body: dict[str, Any]) -> dict[str, Any]:
            response = client.post("/v1/executions", params={"wait": "true"}, json=body)
            assert response.status_code == 200, response.text
            return dict(response.json())

        def run_capability(capability_id: str, **body: Any) -> dict[str, Any]:
            response = client.post(
                f"/v1/capabilities/{capability_id}/execute", json={"wait": True, **body}
            )
            assert response.status_code == 200, response.text
            return dict(response.json())

        assert client.post("/v1/tools/search", json={"query": "divide numbers"}).status_code == 200
        # A direct call (/mcp/servers/<name>), counted by server.
        assert anyio.run(_direct_call, run) == "8.0"
        # Two learned capabilities: the graph learns add -> multiply -> divide.
        second = execute(
            {
                "code": MULTIPLY_THEN_DIVIDE,
                "intent": "multiply then divide",
                "args": {"a": 6, "b": 3},
            }
        )
        assert second["status"] == "succeeded" and second["capability"], second
        first = execute(
            {"code": ADD_THEN_MULTIPLY, "intent": "add then multiply", "args": {"a": 2, "b": 3}}
        )
        assert first["status"] == "succeeded" and first["capability"], first
        run.learned_id, run.capability_id = first["id"], first["capability"]["id"]
        # The same code again: the capability is updated, not doubled.
        again = {"code": ADD_THEN_MULTIPLY, "intent": "add then multiply", "args": {"a": 1, "b": 2}}
        assert execute({**again, "no_cache": True})["capability"]["status"] == "updated"
        # Search by intent, with suggestions; then a run that uses the suggested next tool.
        found = client.post(
            "/v1/capabilities/search",
            json={"intent": "add then multiply", "include_suggestions": True},
        ).json()
        assert run.capability_id in [c["id"] for c in found["capabilities"]], found
        assert (
            execute({"code": DIVIDE, "intent": "divide", "args": {"a": 8, "b": 2}})["result"] == 4
        )
        # Re-runs of the capability (fresh), then one from the cache.
        for _ in range(3):
            assert (
                run_capability(run.capability_id, args={"a": 2, "b": 3}, no_cache=True)["status"]
                == "succeeded"
            )
        cached = run_capability(run.capability_id, args={"a": 2, "b": 3})
        assert cached["cache_hit"] == "capability", cached
        assert client.delete("/v1/cache").status_code == 200
        # A run whose tool failed is not learned; a one-off capability ages into pruning.
        skipped = execute({"code": FAILING_TOOL, "intent": "shrug off a failing tool"})
        assert skipped["status"] == "succeeded" and not skipped["capability"], skipped
        once = execute({"code": WHAT_TIME, "intent": "what time is it"})
        assert once["capability"], once
        with run.db() as conn:
            conn.execute(
                "UPDATE capabilities SET created_at = now() - interval '40 days', "
                "last_used = now() - interval '40 days' WHERE id = %s",
                (once["capability"]["id"],),
            )
        # A backlog: one worker process, three spinning runs; the first is killed at its
        # wall time, the queued ones are cancelled after the scrape that sees them wait.
        spinning = []
        for _ in range(3):
            response = client.post("/v1/executions", json={"code": SPIN, "timeout_s": 5})
            assert response.status_code in (200, 202), response.text
            spinning.append(response.json()["id"])
        run.scrape()
        for execution_id in spinning[1:]:
            client.post(f"/v1/executions/{execution_id}/cancel")
        _wait(lambda: client.get(f"/v1/executions/{spinning[0]}").json()["status"] == "timeout")

    celery = make_celery("obs-test", settings=run.handle.settings)
    try:
        celery.send_task(TaskName.REFRESH_GRAPH_METRICS, kwargs={"force": True}).get(timeout=120)
        celery.send_task(TaskName.PROMOTE_PATTERNS)
        celery.send_task(TaskName.PRUNE_CAPABILITIES)
        # The tenant learned runs above: its tool vectors are fitted (shipped or kept).
        celery.send_task(TaskName.CONSOLIDATE_TOOL_VECTORS).get(timeout=120)
    finally:
        celery.close()
    _wait(lambda: _value(run.scrape(), "agentcards_capabilities_pruned") > 0)
    _wait(lambda: _value(run.scrape(), "agentcards_capabilities_promoted") > 0)
    _wait(lambda: _value(run.scrape(), "agentcards_tool_vector_fits") > 0)


async def _direct_call(run: Scenario) -> str:
    headers = {"Authorization": f"Bearer {run.key}"}
    url = f"{run.handle.gateway_url}/mcp/servers/example"
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("multiply", {"a": 2, "b": 4})
    block = result.content[0]
    assert not result.is_error and isinstance(block, types.TextContent), result
    return block.text


def _value(families: dict[str, list[Any]], name: str) -> float:
    return sum(s.value for s in families.get(name, []) if s.name in (name, f"{name}_total"))


def _wait(check: Callable[[], bool], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.5)
