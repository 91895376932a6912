"""Three gateway replicas (one toolhost, one Redis and Postgres) behind the tests' own
round-robin balancer, per request and per connection, with no affinity: the official SDK
client at 2025-11-25 (sessions) and 2026-07-28 (none) does all a session does, whichever
replica each request reaches.

A stack of its own: it starts two more gateways beside the stack's one (and kills them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
import redis
from mcp import Client, ClientSession, types
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from deploy.launcher.embedded import EmbeddedPostgres, EmbeddedRedis, free_port
from tests.integration.mcp_servers import elicit_test_server, everything_server
from tests.integration.mcp_tasks_client import LegacySession
from tests.integration.scale.round_robin import Mode, RoundRobin
from tests.stack import E2EStack, each_event, running_stack, tool_error, wait_until

REPLICAS = 3
PROGRESS = """
import asyncio
for step in range(3):
    progress(f"step {step}", done=step, total=3)
    await asyncio.sleep(0.2)
return "walked"
"""
ASK = 'return await mcp.asker.ask_name(question=args["q"])'
SLEEP = "import asyncio\nprogress('sleeping')\nawait asyncio.sleep(60)\nreturn 'never'"
UPDATED_URI = "demo://resource/static/document/architecture.md"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


@pytest.fixture(scope="module")
def replicas(
    embedded_pg: EmbeddedPostgres,
    redis_server: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[E2EStack, list[str]]]:
    """The stack (its gateway the first replica) and the ``host:port`` of every replica."""
    tmp = tmp_path_factory.mktemp("replicas")
    servers = {"asker": elicit_test_server(), "everything": everything_server()}
    with running_stack(
        embedded_pg, redis_server, tmp, servers, learning=False, redis_db=15,
    ) as stack:  # fmt: skip
        ports = [stack.settings.gateway_port]
        for n in range(1, REPLICAS):
            port = free_port()
            gateway = stack.start(
                f"gateway-{n}",
                [sys.executable, "-m", "services.gateway"],
                extra_env={"AGENTCARDS_GATEWAY_PORT": str(port)},
            )
            wait_until(lambda p=port: _healthy(p), what=f"replica {n} healthy", proc=gateway)
            ports.append(port)
        yield stack.as_new_tenant(), [f"127.0.0.1:{port}" for port in ports]


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.asynccontextmanager
async def legacy_session(
    url: str, headers: dict[str, str], **options: Any
) -> AsyncIterator[ClientSession]:
    """A 2025-11-25 SDK session (the initialize handshake) at ``url``."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, **options) as session,
    ):
        initialized = await session.initialize()
        assert initialized.protocol_version == "2025-11-25"
        yield session


def answering(name: str, asked: list[str]) -> Any:
    async def elicitation(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": name})

    return elicitation


def payload(result: types.CallToolResult) -> dict[str, Any]:
    if result.structured_content:
        return dict(result.structured_content)
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


def executions(stack: E2EStack, url: str) -> list[dict[str, Any]]:
    """The tenant's executions, over REST at ``url``."""
    with httpx.Client(base_url=url, headers=stack.headers, timeout=30) as rest:
        listed: list[dict[str, Any]] = rest.get("/v1/executions", params={"limit": 100}).json()[
            "executions"
        ]
    return listed


@pytest.mark.parametrize("mode", ["request", "connection"])
async def test_a_session_is_served_by_every_replica(
    replicas: tuple[E2EStack, list[str]], mode: Mode
) -> None:
    """At 2025-11-25: tools listed, a run's progress heard, a downstream elicitation
    answered, a run cancelled, a resource subscription's updates heard, the session deleted;
    the balancer spread the requests over every replica."""
    stack, backends = replicas
    asked: list[str] = []
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.set()

    with RoundRobin(backends, mode).running() as balancer:
        url = f"{balancer.url}/mcp"
        async with legacy_session(
            url, stack.headers, elicitation_callback=answering("Ada", asked)
        ) as session:
            # Each replica counts its sessions, and the bytes Redis holds for them (the
            # record and the primed events), with its heartbeat.
            with anyio.fail_after(10):
                while True:
                    owned, held = await anyio.to_thread.run_sync(session_metrics, balancer.url)
                    if sum(owned.values()) >= 1 and all(held.get(r) for r in owned if owned[r]):
                        break
                    await anyio.sleep(0.2)
            assert len(owned) == REPLICAS and held.keys() == owned.keys(), (owned, held)
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"execute_code", "search_tools"} <= names
            heard: list[str | None] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                heard.append(message)

            walked = await session.call_tool(
                "execute_code",
                {"code": PROGRESS, "learn": False, "no_cache": True},
                progress_callback=on_progress,
            )
            assert payload(walked)["result"] == "walked", walked
            assert [m for m in heard if m and m.startswith("step")] == [
                "step 0", "step 1", "step 2"
            ]  # fmt: skip
            answered = await session.call_tool(
                "execute_code", {"code": ASK, "args": {"q": f"Who ({mode})?"}, "learn": False}
            )
            assert payload(answered)["result"] == {"action": "accept", "name": "Ada"}, answered
            assert asked == [f"Who ({mode})?"]
            # Cancelled by the client: notifications/cancelled ends the run itself.
            started = anyio.Event()

            async def on_sleep(progress: float, total: float | None, message: str | None) -> None:
                started.set()

            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: session.call_tool(
                        "execute_code",
                        {"code": SLEEP, "intent": f"sleep {mode}", "learn": False},
                        progress_callback=on_sleep,
                    )
                )
                with anyio.fail_after(60):
                    await started.wait()
                group.cancel_scope.cancel()
            with anyio.fail_after(60):  # (polling off the event loop: the client's runs on it)
                while not any(
                    e["intent"] == f"sleep {mode}" and e["status"] == "cancelled"
                    for e in await anyio.to_thread.run_sync(executions, stack, balancer.url)
                ):
                    await anyio.sleep(0.2)
        # The direct surface: a subscription's updates come over the GET stream.
        direct = f"{balancer.url}/mcp/servers/everything"
        async with legacy_session(direct, stack.headers, message_handler=on_message) as session:
            await session.subscribe_resource(UPDATED_URI)
            for _ in range(2):  # a toggle: the other balancer mode's test may have left them on
                toggled = await session.call_tool("toggle-subscriber-updates", {})
                assert not toggled.is_error, toggled
                if "Started" in str(toggled.content):
                    break
            with anyio.fail_after(30):
                await updated.wait()
    assert set(balancer.chosen) == set(backends), balancer.chosen


@pytest.mark.parametrize("mode", ["request", "connection"])
async def test_a_stateless_client_s_question_is_answered_through_any_replica(
    replicas: tuple[E2EStack, list[str]], mode: Mode
) -> None:
    """2026-07-28: no session at all; a downstream elicitation comes back to the client as
    ``input_required`` and its answer, sent to whichever replica, reaches the tool."""
    stack, backends = replicas
    asked: list[str] = []
    with RoundRobin(backends, mode).running() as balancer:
        async with (
            create_mcp_http_client(headers=stack.headers) as http,
            Client(
                streamable_http_client(f"{balancer.url}/mcp", http_client=http),
                elicitation_callback=answering("Grace", asked),
            ) as modern,
        ):
            assert modern.protocol_version == "2026-07-28"
            answered = await modern.call_tool(
                "execute_code", {"code": ASK, "args": {"q": "Who now?"}, "learn": False}
            )
            ran = payload(answered)
            assert ran["result"] == {"action": "accept", "name": "Grace"}, json.dumps(ran)
            assert asked == ["Who now?"]


def session_metrics(url: str) -> tuple[dict[str, float], dict[str, float]]:
    """From /metrics, by replica: the sessions it owns, the bytes Redis holds for them."""
    scraped = httpx.get(f"{url}/metrics", timeout=10).text

    def by_replica(metric: str) -> dict[str, float]:
        return {
            line.split('"')[1]: float(line.rsplit(" ", 1)[1])
            for line in scraped.splitlines()
            if line.startswith(metric + "{")
        }

    return by_replica("agentcards_mcp_sessions"), by_replica("agentcards_mcp_session_redis_bytes")


def sse_events(response: httpx.Response, count: int) -> list[dict[str, str]]:
    """The first ``count`` SSE events of a streamed response, field by field."""
    events: list[dict[str, str]] = []
    for event in each_event(response):
        events.append(event)
        if len(events) == count:
            break
    return events


def test_every_stream_of_a_session_opens_with_an_id_and_a_retry(
    replicas: tuple[E2EStack, list[str]],
) -> None:
    """Raw HTTP through the balancer: the answer to ``initialize``, a request's stream and
    the GET stream each open with a priming event (an id, ``retry:``, no data); a stream
    resumed with ``Last-Event-ID`` (on another replica) replays what came after that event,
    then primes itself again; after ``DELETE`` the session is gone on every replica."""
    stack, backends = replicas
    accept = {"accept": "application/json, text/event-stream"}
    with (
        RoundRobin(backends, "request").running() as balancer,
        httpx.Client(headers=stack.headers | accept, timeout=30) as http,
    ):
        url = f"{balancer.url}/mcp"
        with http.stream("POST", url, json=INIT) as opened:
            events = sse_events(opened, 1)
            session = {
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert http.post(url, json=initialized, headers=session).status_code == 202
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        with http.stream("POST", url, json=listing, headers=session) as listed:
            primed, answered = sse_events(listed, 2)
            events.append(primed)
            assert json.loads(answered["data"])["result"]["tools"]
        with http.stream("GET", url, headers=session | {"accept": "text/event-stream"}) as get:
            events += sse_events(get, 1)
        resumed = session | {"accept": "text/event-stream", "last-event-id": events[1]["id"]}
        with http.stream("GET", url, headers=resumed) as again:
            replayed, reprimed = sse_events(again, 2)  # what came after it, then a new cursor
        assert replayed["id"] and json.loads(replayed["data"]) == json.loads(answered["data"])
        events.append(reprimed)
        # Resumed from that new cursor (another replica again), the answer is not sent twice:
        # the stream only primes itself once more.
        after = session | {"accept": "text/event-stream", "last-event-id": reprimed["id"]}
        with http.stream("GET", url, headers=after) as third:
            (primed_again,) = sse_events(third, 1)
        assert primed_again["data"] == "" and primed_again["id"] == reprimed["id"]
        assert http.delete(url, headers=session).status_code == 200
        gone = http.post(url, json=listing, headers=session)
        assert gone.status_code == 404, gone.text
    for event in events:
        assert event["id"] and event["retry"] == "1000" and event["data"] == "", events
    assert len({event["id"] for event in events}) == len(events)


def test_a_session_is_only_its_holders_on_every_replica(
    replicas: tuple[E2EStack, list[str]],
) -> None:
    """A session id is no credential. Another key of the same tenant, and a key of another
    tenant, are answered 404 on every replica (the owner and the ones that would forward) for
    a request, a Last-Event-ID resume and DELETE, as if the session did not exist; the holder
    goes on. With the owner taken for dead, such a caller does not take the session over:
    the holder's next request does."""
    stack, backends = replicas
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    holder, peer, stranger = (
        stack.as_new_tenant(tenant), stack.as_new_tenant(tenant), stack.as_new_tenant()
    )  # fmt: skip
    accept = {"accept": "application/json, text/event-stream"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    store = redis.Redis.from_url(stack.settings.redis_url or "")
    with httpx.Client(headers=accept, timeout=30) as http:
        with http.stream(
            "POST", f"http://{backends[0]}/mcp", json=INIT, headers=holder.headers
        ) as opened:
            (primed,) = sse_events(opened, 1)
            session = {
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
        key = f"agentcards:mcp:session:{session['mcp-session-id']}"
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (
            http.post(
                f"http://{backends[0]}/mcp", json=initialized, headers=holder.headers | session
            ).status_code
            == 202
        )
        resume = session | {"accept": "text/event-stream", "last-event-id": primed["id"]}
        for backend in backends:
            url = f"http://{backend}/mcp"
            for intruder in (peer, stranger):
                refused = [
                    head(http, "POST", url, json=listing, headers=intruder.headers | session),
                    head(http, "GET", url, headers=intruder.headers | resume),
                    head(http, "DELETE", url, headers=intruder.headers | session),
                ]
                assert refused == [(404, "Session not found")] * 3, (backend, refused)
            served = http.post(url, json=listing, headers=holder.headers | session)
            assert served.status_code == 200 and "execute_code" in served.text, served.text
        # Its owner taken for dead (no heartbeat under this name): intruders take nothing.
        store.hset(key, "owner", GHOST)
        for backend in backends:
            url = f"http://{backend}/mcp"
            answer = head(http, "POST", url, json=listing, headers=peer.headers | session)
            assert answer == (404, "Session not found"), answer
        assert store.hget(key, "owner") == GHOST.encode()
        served = http.post(
            f"http://{backends[1]}/mcp", json=listing, headers=holder.headers | session
        )
        assert served.status_code == 200 and "execute_code" in served.text, served.text
        assert store.hget(key, "owner") not in {None, GHOST.encode()}
        assert (
            http.delete(f"http://{backends[2]}/mcp", headers=holder.headers | session).status_code
            == 200
        )


def test_a_2025_11_25_task_made_on_one_replica_is_read_and_cancelled_on_another(
    replicas: tuple[E2EStack, list[str]],
) -> None:
    """MCP tasks at 2025-11-25 are the run's durable rows, not a replica's memory: a task a
    session made through one replica is read to its result (``tasks/get``, ``tasks/result``)
    by a session on another, and a task made on one and cancelled through another reads
    ``cancelled`` on the first; a third replica lists both."""
    stack, backends = replicas
    tenant = stack.as_new_tenant()
    first, second, third = (
        LegacySession(dataclasses.replace(tenant, gateway_url=f"http://{backend}"))
        for backend in backends
    )

    def made(session: LegacySession, code: str) -> str:
        arguments = {"code": code, "no_cache": True}
        call = {"name": "execute_code", "arguments": arguments, "task": {"ttl": 60_000}}
        reply = session.request("tools/call", call)
        assert reply["result"]["task"]["status"] == "working", reply
        return str(reply["result"]["task"]["taskId"])

    quick = made(first, "import asyncio\nawait asyncio.sleep(1)\nreturn 'made on the first'")
    result = second.request("tasks/result", {"taskId": quick})["result"]
    assert result["structuredContent"]["result"] == "made on the first", result
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": quick}
    assert second.request("tasks/get", {"taskId": quick})["result"]["status"] == "completed"

    long = made(first, SLEEP)
    assert second.request("tasks/get", {"taskId": long})["result"]["status"] == "working"
    cancelled = second.request("tasks/cancel", {"taskId": long})["result"]
    assert cancelled["status"] == "cancelled", cancelled
    assert first.request("tasks/get", {"taskId": long})["result"]["status"] == "cancelled"
    listed = {t["taskId"]: t["status"] for t in third.request("tasks/list", {})["result"]["tasks"]}
    assert listed == {quick: "completed", long: "cancelled"}, listed


async def test_what_a_client_set_outlives_its_replica(
    replicas: tuple[E2EStack, list[str]],
) -> None:
    """The log level a client set and its resource subscription go on after a take-over:
    with both sessions' owner taken for dead (its name replaced by one nobody heartbeats, as
    when a replica stalls past its TTL), the next requests re-open them elsewhere, and the
    client still hears a run's info-level log lines and the subscribed resource's updates."""
    stack, backends = replicas
    mine = stack.as_new_tenant()
    store = redis.Redis.from_url(stack.settings.redis_url or "")
    levels: list[str] = []
    updates: list[anyio.Event] = [anyio.Event()]

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        levels.append(params.level)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates[-1].set()

    before = set(store.keys("agentcards:mcp:session:*"))
    with RoundRobin(backends, "request").running() as balancer:
        async with (
            legacy_session(f"{balancer.url}/mcp", mine.headers, logging_callback=on_log) as code,
            legacy_session(
                f"{balancer.url}/mcp/servers/everything", mine.headers, message_handler=on_message
            ) as direct,
        ):
            await code.set_logging_level("info")
            await direct.subscribe_resource(UPDATED_URI)
            for _ in range(2):  # a toggle: another test may have left them on
                toggled = await direct.call_tool("toggle-subscriber-updates", {})
                if "Started" in str(toggled.content):
                    break
            with anyio.fail_after(30):
                await updates[-1].wait()
            sessions = set(store.keys("agentcards:mcp:session:*")) - before
            assert len(sessions) == 2, sessions
            for key in sessions:
                store.hset(key, "owner", GHOST)
            with anyio.fail_after(30):
                while any(store.hget(key, "owner") == GHOST.encode() for key in sessions):
                    await code.list_tools()
                    await direct.list_tools()
            # The copies left behind end at their replicas' next heartbeat; the client's GET
            # stream then resumes on the session's new owner.
            await anyio.sleep(stack.settings.mcp_replica_ttl_s / 3 + 2)
            levels.clear()
            updates.append(anyio.Event())
            walked = await code.call_tool(
                "execute_code", {"code": PROGRESS, "learn": False, "no_cache": True}
            )
            assert payload(walked)["result"] == "walked", walked
            assert "info" in levels, levels
            with anyio.fail_after(60):
                await updates[-1].wait()


GHOST = "ghost:0:dead00"  # a replica name no heartbeat is written under


def head(http: httpx.Client, method: str, url: str, **options: Any) -> tuple[int, str]:
    """A request's status and, for a JSON-RPC error, its message (the body of another answer,
    an SSE stream say, is not waited for)."""
    with http.stream(method, url, **options) as answer:
        if not answer.headers.get("content-type", "").startswith("application/json"):
            return answer.status_code, answer.headers.get("content-type", "")
        raw = answer.read()
    error = (json.loads(raw) if raw else {}).get("error") or {}
    return answer.status_code, str(error.get("message"))


WALK = """
import asyncio
for step in range(12):
    progress(f"walk {step}", done=step, total=12)
    await asyncio.sleep(0.6)
return "arrived"
"""


async def test_a_call_goes_on_when_its_replica_is_killed(
    replicas: tuple[E2EStack, list[str]],
) -> None:
    """Near the end of the module: it kills a replica. A 2025-11-25 call's stream carries
    event ids; the replica that owns its session is killed mid-run (SIGKILL); the SDK client
    resumes the stream on its own (Last-Event-ID, through the balancer: another replica), that
    replica takes the session over and goes on with the same run: every progress step once,
    in order, the answer, and one execution. A direct call (``/mcp/servers/everything``) the
    same replica was running in a session of its own is answered too, once: not called
    again (a tool may have effects), a ``worker_lost`` error naming its execution."""
    stack, backends = replicas
    heard: list[str] = []
    two_heard, direct_heard = anyio.Event(), anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")
        if len(heard) == 2:
            two_heard.set()

    async def on_direct_progress(progress: float, total: float | None, message: str | None) -> None:
        direct_heard.set()

    store = redis.Redis.from_url(stack.settings.redis_url or "")
    answers: list[types.CallToolResult] = []
    direct_answers: list[types.CallToolResult] = []

    async def call(session: ClientSession) -> None:
        arguments = {"code": WALK, "intent": "walk through a kill", "learn": False}
        answer = await session.call_tool("execute_code", arguments, progress_callback=on_progress)
        answers.append(answer)

    async def call_direct(session: ClientSession) -> None:
        arguments = {"duration": 8, "steps": 8}
        direct_answers.append(
            await session.call_tool(
                "trigger-long-running-operation", arguments, progress_callback=on_direct_progress
            )
        )

    def new_session(known: set[bytes]) -> tuple[str, bytes]:
        (key,) = set(store.keys("agentcards:mcp:session:*")) - known
        owner = store.hget(key, "owner")
        assert owner is not None
        return key.decode().rsplit(":", 1)[1], owner

    with (
        RoundRobin(backends, "request").running() as balancer,
        anyio.fail_after(120),
    ):
        known = set(store.keys("agentcards:mcp:session:*"))
        async with contextlib.AsyncExitStack() as sessions:
            session = await sessions.enter_async_context(
                legacy_session(f"{balancer.url}/mcp", stack.headers)
            )
            session_id, owner = new_session(known)
            known.add(f"agentcards:mcp:session:{session_id}".encode())
            for _ in range(REPLICAS):  # round-robin: one of the next opens lands on that owner
                attempt = contextlib.AsyncExitStack()
                direct = await attempt.enter_async_context(
                    legacy_session(f"{balancer.url}/mcp/servers/everything", stack.headers)
                )
                direct_id, direct_owner = new_session(known)
                known.add(f"agentcards:mcp:session:{direct_id}".encode())
                if direct_owner == owner:
                    sessions.push_async_callback(attempt.aclose)
                    break
                await attempt.aclose()
            assert direct_owner == owner
            # A direct call's task made on each replica (one is on the one killed below):
            # no sandbox, but a durable row, its end recorded by the toolhost.
            tasks = await anyio.to_thread.run_sync(_direct_tasks, stack, backends)
            async with anyio.create_task_group() as group:
                group.start_soon(call, session)
                group.start_soon(call_direct, direct)
                await two_heard.wait()
                await direct_heard.wait()
                owner_pid = int(owner.decode().split(":")[1])
                (killed,) = [p for p in stack.procs.values() if p.proc.pid == owner_pid]
                os.killpg(killed.proc.pid, signal.SIGKILL)
                killed.proc.wait()
            # The session went on too: another replica owns it, and serves the next request.
            new_owner = store.hget(f"agentcards:mcp:session:{session_id}", "owner")
            assert new_owner is not None and new_owner != owner
            assert {tool.name for tool in (await session.list_tools()).tools} >= {"execute_code"}
        listed = await anyio.to_thread.run_sync(executions, stack, balancer.url)
        read = await anyio.to_thread.run_sync(_tasks_read, stack, balancer.url, tasks)
    assert read == ["completed"] * REPLICAS, read  # each read on to its end through the others
    (answer,) = answers
    assert payload(answer)["result"] == "arrived", answer
    assert heard == [f"walk {step}" for step in range(12)], heard
    # Answered: each call is off its session's record (a next take-over does not send it again).
    assert not store.hgetall(f"agentcards:mcp:calls:{session_id}")
    assert not store.hgetall(f"agentcards:mcp:calls:{direct_id}")
    runs = [e for e in listed if e["intent"] == "walk through a kill"]
    assert [run["status"] for run in runs] == ["succeeded"]
    (lost,) = direct_answers
    body = tool_error(lost)
    assert body["type"] == "worker_lost" and body["details"]["execution_id"], lost


def _direct_tasks(stack: E2EStack, backends: list[str]) -> list[str]:
    """A 2025-11-25 direct call's task (an 8-second operation) made through each replica."""
    made = []
    for backend in backends:
        session = LegacySession(
            dataclasses.replace(stack, gateway_url=f"http://{backend}"), "/mcp/servers/everything"
        )
        call = {"name": "trigger-long-running-operation",
                "arguments": {"duration": 8, "steps": 2}, "task": {}}  # fmt: skip
        made.append(str(session.request("tools/call", call)["result"]["task"]["taskId"]))
    return made


def _tasks_read(stack: E2EStack, url: str, tasks: list[str]) -> list[str]:
    """Each task read until it ended, by a new session through ``url``: its last status."""
    session = LegacySession(dataclasses.replace(stack, gateway_url=url), "/mcp/servers/everything")
    return [str(session.until_done(task_id, timeout_s=60)["status"]) for task_id in tasks]


async def test_a_stateless_call_whose_replica_is_killed(
    replicas: tuple[E2EStack, list[str]],
) -> None:
    """After the test above (it kills a second replica). At 2026-07-28 there is no session
    to go on elsewhere: a call is one POST whose response carries the run's progress and
    answer, while the run itself belongs to a sandbox worker. The replica serving that POST
    killed mid-run (SIGKILL) takes the response with it: the client's call ends in an error
    (it neither hangs nor gets an answer made up), the run goes on to its end once (one
    execution, succeeded, read from a live replica), and the next call is served."""
    stack, backends = replicas
    heard: list[str] = []
    two_heard = anyio.Event()
    outcome: list[object] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")
        if len(heard) == 2:
            two_heard.set()

    async def call(client: Client) -> None:
        arguments = {"code": WALK, "intent": "a stateless walk through a kill", "learn": False}
        try:
            outcome.append(
                await client.call_tool("execute_code", arguments, progress_callback=on_progress)
            )
        except Exception as exc:  # what the client sees of its replica's death
            outcome.append(exc)

    with RoundRobin(backends, "request").running() as balancer:
        async with (
            create_mcp_http_client(headers=stack.headers) as http,
            Client(streamable_http_client(f"{balancer.url}/mcp", http_client=http)) as modern,
        ):
            assert modern.protocol_version == "2026-07-28"
            async with anyio.create_task_group() as group:
                group.start_soon(call, modern)
                with anyio.fail_after(60):
                    await two_heard.wait()
                serving = balancer.chosen[-1]  # the call's POST: nothing else is in flight
                index = backends.index(serving)
                killed = stack.procs["gateway" if index == 0 else f"gateway-{index}"]
                os.killpg(killed.proc.pid, signal.SIGKILL)
                killed.proc.wait()
                with anyio.move_on_after(30):
                    while not outcome:
                        await anyio.sleep(0.2)
                group.cancel_scope.cancel()
            assert outcome and isinstance(outcome[0], Exception), outcome  # [] : it hung
            answered = await modern.call_tool("execute_code", {"code": "return 2", "learn": False})
            assert payload(answered)["result"] == 2, answered
        with anyio.fail_after(60):
            while True:
                listed = await anyio.to_thread.run_sync(executions, stack, balancer.url)
                runs = [e for e in listed if e["intent"] == "a stateless walk through a kill"]
                if [run["status"] for run in runs] == ["succeeded"]:
                    break
                await anyio.sleep(0.5)
