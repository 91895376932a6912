"""The result cache on the real stack: gateway, sandbox and learning workers, toolhost, and real
MCP servers (npm server-filesystem, PyPI mcp-server-time, the example server, and a test server
whose schema, failures and answers the tests control). A result is cached only for a TTL the
operator gave (shared/cache/policy.py): the entries below say theirs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import redis

from shared.cache.invalidate import Trigger, invalidate
from shared.cache.policy import NO_TTL
from tests.integration.mcp_servers import (
    cache_test_server,
    example_server,
    filesystem_server,
    time_server,
)
from tests.stack import REPO, E2EStack, settings_env, stack_fixture, wait_until

COUNTER = "return await mcp.cachetest.counter(key=args['k'])"


# The cachetest server's tools are cached 300 s, except `short` (3 s: long enough for a loaded
# machine to ask again before it expires, short enough to wait past).
CACHETEST = {"cache": {"ttl_s": 300, "tools": {"short": {"ttl_s": 3}}}}
NEVER = {"ttl_s": 0}


def _servers(tmp: Path) -> dict[str, Any]:
    return {
        "files": filesystem_server(tmp / "files", agentcards={"cache": {"ttl_s": 300}}),
        # get_current_time as a newcomer's plain entry has it (no TTL); convert_time never cached.
        "clock": {**time_server(), "agentcards": {"cache": {"tools": {"convert_time": NEVER}}}},
        "tick": {
            **time_server(),
            "agentcards": {"cache": {"tools": {"get_current_time": {"ttl_s": 2}}}},
        },
        "example": example_server(tmp),
        "cachetest": cache_test_server(tmp / "cachetest", agentcards=CACHETEST),
    }


stack = stack_fixture(_servers)


def _run(stack: E2EStack, code: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    with stack.client() as client:
        response = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": code, "args": args, **extra}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _execute(stack: E2EStack, capability_id: str, args: dict[str, Any], **extra: Any) -> Any:
    with stack.client() as client:
        response = client.post(
            f"/v1/capabilities/{capability_id}/execute",
            params={"wait": "true"},
            json={"args": args, **extra},
        )
    assert response.status_code == 200, response.text
    return response.json()


def _learn(stack: E2EStack, code: str, args: dict[str, Any], intent: str) -> str:
    first = _run(stack, code, args, intent=intent)
    assert first["status"] == "succeeded", first
    assert first["capability"], first
    return str(first["capability"]["id"])


def _log(stack: E2EStack, trigger: str) -> list[dict[str, Any]]:
    with stack.db() as conn:
        rows = conn.execute(
            'SELECT tenant_id, trigger, scope, "count", capability_id, tool_id, created_at '
            "FROM cache_invalidation_log WHERE trigger = %s ORDER BY id",
            (trigger,),
        ).fetchall()
    return [dict(r) for r in rows]


def test_tools_carry_their_annotations_and_overrides(stack: E2EStack) -> None:
    with stack.client() as client:
        tools = {t["id"]: t for t in client.get("/v1/tools").json()["tools"]}
    assert tools["files:read_text_file"]["annotations"]["readOnlyHint"] is True
    assert tools["files:write_file"]["annotations"]["readOnlyHint"] is False
    assert tools["clock:convert_time"]["cache_override"] == {"ttl_s": 0}
    assert tools["cachetest:short"]["cache_override"] == {"ttl_s": 3}
    assert tools["clock:get_current_time"]["cache_override"] == {}
    assert tools["example:add"]["annotations"] == {}


def test_a_second_identical_call_hits_other_args_miss_and_no_cache_bypasses(
    stack: E2EStack,
) -> None:
    first = _run(stack, COUNTER, {"k": "same"})
    assert first["status"] == "succeeded" and first["cache_hit"] is None
    second = _run(
        stack,
        "# formatting differs\nreturn await mcp.cachetest.counter(key = args['k'])",
        {"k": "same"},
    )
    assert second["cache_hit"] == "execution"
    assert second["result"] == first["result"]
    assert second["source_execution_id"] == first["id"] and second["cached_at"]
    assert second["id"] != first["id"] and second["status"] == "succeeded"
    other = _run(stack, COUNTER, {"k": "different"})
    assert other["cache_hit"] is None and other["result"]["n"] != first["result"]["n"]
    bypass = _run(stack, COUNTER, {"k": "same"}, no_cache=True)
    assert bypass["cache_hit"] is None and bypass["result"]["n"] > first["result"]["n"]
    with stack.db() as conn:  # the hit is an execution too, with no sandbox run
        row = conn.execute(
            "SELECT status, worker FROM executions WHERE id = %s", (second["id"],)
        ).fetchone()
    assert row == {"status": "succeeded", "worker": None}


def test_a_tool_without_read_only_hint_is_never_cached(stack: E2EStack) -> None:
    code = "return await mcp.example.add(a=args['a'], b=2)"
    runs = [_run(stack, code, {"a": 40}) for _ in range(2)]
    assert [r["cache_hit"] for r in runs] == [None, None]
    assert all(r["result"] == 42 for r in runs)


def test_a_tool_configured_ttl_0_is_never_cached(stack: E2EStack) -> None:
    code = (
        "return await mcp.clock.convert_time(source_timezone='UTC', time='12:00', "
        "target_timezone='Asia/Tokyo')"
    )
    runs = [_run(stack, code, {}) for _ in range(2)]
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert [r["cache_hit"] for r in runs] == [None, None]


def _entry_lifetime_s(stack: E2EStack, capability_id: str) -> float:
    with stack.db() as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM expires_at - created_at) AS s FROM capability_cache "
            "WHERE capability_id = %s",
            (capability_id,),
        ).fetchone()
    assert row is not None, "the capability's run left no cached result"
    return float(row["s"])


def test_up_and_tools_say_what_is_cached_and_for_how_long(stack: E2EStack) -> None:
    with stack.client() as client:
        tools = {t["id"]: t["cache"] for t in client.get("/v1/tools").json()["tools"]}
    assert tools["tick:get_current_time"] == {"cached": True, "ttl_s": 2, "why": "operator ttl_s"}
    # Nothing configured: read-only is not enough, the tool is not cached.
    unsaid = {"cached": False, "ttl_s": 0, "why": NO_TTL}
    assert tools["tick:convert_time"] == unsaid and tools["clock:get_current_time"] == unsaid
    assert tools["clock:convert_time"] == {
        "cached": False, "ttl_s": 0, "why": "operator ttl_s: 0",
    }  # fmt: skip
    assert tools["example:add"] == {"cached": False, "ttl_s": 0, "why": "not read-only"}
    assert tools["files:read_text_file"] == {"cached": True, "ttl_s": 300, "why": "operator ttl_s"}
    assert tools["files:write_file"]["why"] == "not read-only"


def test_a_capability_reading_the_clock_is_never_served_past_the_tools_ttl(
    stack: E2EStack,
) -> None:
    code = "return await mcp.tick.get_current_time(timezone=args['tz'])"
    capability = _learn(stack, code, {"tz": "UTC"}, "what time is it now on the tick clock")
    first = _execute(stack, capability, {"tz": "UTC"})
    assert first["status"] == "succeeded" and first["cache_hit"] is None, first
    # The capability level's 3600 s is capped by the tool's own 2 s.
    assert _entry_lifetime_s(stack, capability) == 2
    time.sleep(2.5)
    later = _execute(stack, capability, {"tz": "UTC"})
    assert later["status"] == "succeeded" and later["cache_hit"] is None, later
    assert later["result"]["datetime"] > first["result"]["datetime"]


def test_asking_the_time_twice_gives_two_fresh_answers(stack: E2EStack) -> None:
    """``mcp-server-time``'s clock as a plain entry has it: read-only, no TTL configured, so
    no level (execution, capability) ever answers from the cache."""
    code = "return await mcp.clock.get_current_time(timezone=args['tz'])"
    first = _run(stack, code, {"tz": "Asia/Tokyo"})
    time.sleep(1.1)  # the server answers to the second: a wait past one, not a timed assertion
    second = _run(stack, code, {"tz": "Asia/Tokyo"})
    for run in (first, second):
        assert run["status"] == "succeeded" and run["cache_hit"] is None, run
        assert run["source_execution_id"] is None
    assert second["result"]["datetime"] > first["result"]["datetime"]
    with stack.db() as conn:  # both ran in a sandbox
        workers = conn.execute(
            "SELECT worker FROM executions WHERE id = ANY(%s)", ([first["id"], second["id"]],)
        ).fetchall()
    assert len(workers) == 2 and all(w["worker"] for w in workers), workers

    capability = _learn(stack, code, {"tz": "UTC"}, "what time is it now in a given time zone")
    runs = [_execute(stack, capability, {"tz": "UTC"}) for _ in range(2)]
    assert [r["cache_hit"] for r in runs] == [None, None], runs
    with stack.client() as client:
        facts = client.get(f"/v1/capabilities/{capability}/cache").json()
    assert facts["cacheable"] is False and facts["entries"] == 0, facts
    assert facts["reason"] == f"tool clock:get_current_time has {NO_TTL}"


def test_a_write_invalidates_cached_reads_of_that_server(stack: E2EStack) -> None:
    path = str((stack.tmp / "files" / "note.txt").resolve())
    write = "return await mcp.files.write_file(path=args['path'], content=args['content'])"
    read = "return await mcp.files.read_text_file(path=args['path'])"
    assert _run(stack, write, {"path": path, "content": "first"})["status"] == "succeeded"
    before = _run(stack, read, {"path": path})
    assert before["cache_hit"] is None and "first" in str(before["result"])
    cached = _run(stack, read, {"path": path})
    assert cached["cache_hit"] == "execution" and cached["result"] == before["result"]
    again = _run(stack, write, {"path": path, "content": "second"})
    assert again["status"] == "succeeded" and again["cache_hit"] is None
    after = _run(stack, read, {"path": path})
    assert after["cache_hit"] is None
    assert "second" in str(after["result"]) and "first" not in str(after["result"])
    logged = [r for r in _log(stack, "write") if r["scope"] == "server:files"]
    assert logged and logged[-1]["count"] >= 1
    print("\ncache_invalidation_log after the write:", *logged, sep="\n  ")


def test_a_schema_change_invalidates_exactly_the_entries_that_used_the_tool(
    stack: E2EStack,
) -> None:
    lookup = "return await mcp.cachetest.lookup(key=args['k'])"
    other = "return await mcp.cachetest.other(key=args['k'])"
    scoped = {"lookup": ["cachetest:lookup"], "other": ["cachetest:other"]}
    for code, tools in ((lookup, scoped["lookup"]), (other, scoped["other"])):
        _run(stack, code, {"k": "s"}, tools=tools)
        assert _run(stack, code, {"k": "s"}, tools=tools)["cache_hit"] == "execution"
    folder = stack.tmp / "cachetest"
    (folder / "schema").write_text("v2")
    os.kill(int((folder / "pid").read_text()), signal.SIGKILL)  # the toolhost restarts it

    def changed() -> bool:
        return any(r["tool_id"] == "cachetest:lookup" for r in _log(stack, "schema_change"))

    wait_until(changed, what="the lookup schema change to be seen", timeout_s=60)
    logged = [r for r in _log(stack, "schema_change") if r["tool_id"] == "cachetest:lookup"]
    assert [r["count"] for r in logged] == [1]
    assert not any(r["tool_id"] == "cachetest:other" for r in _log(stack, "schema_change"))
    wait_until(lambda: _available(stack, "cachetest:other"), what="cachetest back")
    assert _run(stack, other, {"k": "s"}, tools=scoped["other"])["cache_hit"] == "execution"
    fresh = _run(stack, lookup, {"k": "s"}, tools=scoped["lookup"])
    assert fresh["cache_hit"] is None and fresh["result"] == "lookup:s:v2"


def _available(stack: E2EStack, tool: str) -> bool:
    with stack.db() as conn:
        row = conn.execute("SELECT available FROM tools WHERE id = %s", (tool,)).fetchone()
    return bool(row and row["available"])


def test_three_consecutive_failures_invalidate_a_capability(stack: E2EStack) -> None:
    code = "return await mcp.cachetest.flaky(key=args['k'])"
    capability = _learn(stack, code, {"k": "x"}, "echo a key through the flaky tool")
    assert _execute(stack, capability, {"k": "x"})["cache_hit"] is None
    assert _execute(stack, capability, {"k": "x"})["cache_hit"] == "capability"
    (stack.tmp / "cachetest" / "fail").write_text("1")
    try:
        for _ in range(3):
            failed = _execute(stack, capability, {"k": "x"}, no_cache=True)
            assert failed["status"] == "failed" and failed["cache_hit"] is None
        logged = [r for r in _log(stack, "failures") if str(r["capability_id"]) == capability]
        assert len(logged) == 1 and logged[0]["count"] == 1
        assert _execute(stack, capability, {"k": "x"})["status"] == "failed"  # no stale hit
    finally:
        (stack.tmp / "cachetest" / "fail").unlink()

    def rate_dropped() -> bool:
        with stack.db() as conn:
            row = conn.execute(
                "SELECT success_rate FROM capabilities WHERE id = %s", (capability,)
            ).fetchone()
        return bool(row) and float(row["success_rate"]) < 1.0  # type: ignore[index]

    wait_until(rate_dropped, what="the capability's success rate to drop")


def test_entries_expire_and_the_beat_job_deletes_expired_rows(stack: E2EStack) -> None:
    code = "return await mcp.cachetest.short(key=args['k'])"
    capability = _learn(stack, code, {"k": "t"}, "count calls of the short tool")
    assert _execute(stack, capability, {"k": "t"})["cache_hit"] is None
    assert _execute(stack, capability, {"k": "t"})["cache_hit"] == "capability"
    time.sleep(3.5)  # the tool's TTL is 3 s: not a timed assertion, a wait past it
    assert _run(stack, code, {"k": "t"})["cache_hit"] is None  # L1 expired
    assert _execute(stack, capability, {"k": "t"})["cache_hit"] is None  # L2 too
    time.sleep(3.5)
    with stack.db() as conn:
        client = redis.Redis.from_url(stack.settings.redis_url or "")
        removed = invalidate(conn, client, trigger=Trigger.TTL, scope="expired", expired=True)
        left = conn.execute(
            "SELECT count(*) AS n FROM capability_cache WHERE capability_id = %s", (capability,)
        ).fetchone()
    assert removed >= 1 and left == {"n": 0}
    assert _log(stack, "ttl")[-1]["count"] >= 1


def test_manual_invalidation_rest_and_cli(stack: E2EStack) -> None:
    _run(stack, COUNTER, {"k": "manual"})
    assert _run(stack, COUNTER, {"k": "manual"})["cache_hit"] == "execution"
    with stack.client() as client:
        cleared = client.delete("/v1/cache").json()
    assert cleared["invalidated"] >= 1
    assert _run(stack, COUNTER, {"k": "manual"})["cache_hit"] is None

    code = "return await mcp.cachetest.other(key=args['k'])"
    capability = _learn(stack, code, {"k": "m"}, "echo a key through the other tool")
    _execute(stack, capability, {"k": "m"})
    assert _execute(stack, capability, {"k": "m"})["cache_hit"] == "capability"
    with stack.client() as client:
        assert client.delete(f"/v1/capabilities/{capability}/cache").json()["invalidated"] == 1
        assert client.delete("/v1/capabilities/nope/cache").status_code == 404
    assert _execute(stack, capability, {"k": "m"})["cache_hit"] is None

    assert _run(stack, COUNTER, {"k": "manual"})["cache_hit"] == "execution"
    done = subprocess.run(
        [sys.executable, "-m", "deploy.cli.main", "cache", "clear", "--server", "cachetest"],
        env=settings_env(stack.settings), cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"scope": "server:cachetest"' in done.stdout
    assert _run(stack, COUNTER, {"k": "manual"})["cache_hit"] is None
    scopes = {r["scope"] for r in _log(stack, "manual")}
    assert {"tenant", f"capability:{capability}", "server:cachetest"} <= scopes


def test_twenty_concurrent_identical_requests_make_one_row(stack: E2EStack) -> None:
    code = "return await mcp.cachetest.other(key=args['k'])"
    capability = _learn(stack, code, {"k": "crowd"}, "echo a crowd key through the other tool")

    def one(_: int) -> dict[str, Any]:
        with httpx.Client(base_url=stack.gateway_url, timeout=120) as client:
            response = client.post(
                f"/v1/capabilities/{capability}/execute",
                params={"wait": "true"},
                json={"args": {"k": "crowd"}},
            )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    with ThreadPoolExecutor(max_workers=20) as pool:
        bodies = list(pool.map(one, range(20)))
    assert all(b["status"] == "succeeded" and b["result"] == "other:crowd" for b in bodies)
    with stack.db() as conn:
        rows = conn.execute(
            "SELECT count(*) AS n FROM capability_cache WHERE capability_id = %s", (capability,)
        ).fetchone()
    assert rows == {"n": 1}


def test_stats_and_metrics_report_hits_misses_and_invalidations(stack: E2EStack) -> None:
    _run(stack, COUNTER, {"k": "stats"})
    _run(stack, COUNTER, {"k": "stats"})
    with stack.client() as client:
        stats = client.get("/v1/cache/stats").json()
        metrics = client.get("/metrics").text
    execution = stats["levels"]["execution"]
    assert execution["hits"] >= 1 and execution["misses"] >= 1 and execution["entries"] >= 1
    assert 0 < execution["hit_rate"] < 1
    assert "write" in stats["invalidations"] or "manual" in stats["invalidations"]
    assert 'agentcards_cache_hits_total{level="execution"}' in metrics
    assert 'agentcards_cache_hit_rate{level="execution"}' in metrics
