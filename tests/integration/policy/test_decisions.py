"""Cedar policies decide each tool call on the real stack: a script's computed arguments, both
languages, keys by name and people by OAuth group (real `oidc-provider` tokens), direct
calls, submissions; refused calls never reach the server (the filesystem server from npm
and a recording server of the tests' own); decisions reach agent code, the trace, the audit
log and the metrics; a changed file changes decisions, a bad one keeps the last good set.

Its own stack: a policy file denies what it does not permit for every tenant of the stack,
and the gateway's settings name the identity provider (a fixed port: tokens name it).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from shared.auth.store import issue_key
from tests.harness import remove_at_exit, wait_until
from tests.integration.identity.provider import (
    IdentityProvider,
    free_port,
    gateway_options,
    running_provider,
)
from tests.integration.mcp_servers import filesystem_server, recording_server
from tests.stack import E2EStack, settings_env, stack_fixture

IDP_PORT, GATEWAY_PORT = free_port(), free_port()
APPROVAL_TIMEOUT_S = 20
APPROVAL_WAIT_CAP_S = 12  # of a run's waiting, this much is not counted (test_approvals.py)
RESOURCE = f"http://127.0.0.1:{GATEWAY_PORT}/mcp"
IDENTITY = {
    "tenant_claim": "org",
    "groups_claim": "groups",
    "groups": {
        "engineers": {"tools": ["rec:*", "fs:*"], "scopes": ["agentcards:read", "agentcards:execute"]},
        "readers": {"tools": ["rec:*", "fs:*"], "scopes": ["agentcards:read", "agentcards:execute"]},
    },
}  # fmt: skip
ROOT = remove_at_exit(Path(tempfile.mkdtemp(prefix="policy-")))
FILES = ROOT / "files"  # the filesystem server's one allowed directory
SCRATCH = FILES / "scratch"
RECORDING = ROOT / "calls.jsonl"
POLICY_FILE = ROOT / "policy.cedar"
POLICIES = f"""
@id("code-for-all-but-direct-only")
permit(principal, action in [AgentCards::Action::"execute_code", AgentCards::Action::"execute_capability"], resource)
  unless {{ principal is AgentCards::Key && principal.name == "direct-only" }};

@id("read-only-tools")
permit(principal, action == AgentCards::Action::"call_tool", resource) when {{ resource.read_only }};

@id("writes-in-scratch")
permit(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"fs:write_file")
  when {{ context.args has path && context.args.path like "{SCRATCH.resolve()}/*" }};

@id("ci-key-pays")
permit(principal is AgentCards::Key, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"rec:pay")
  when {{ principal.name == "ci" || principal.name == "direct-only" }};

@id("engineers-pay")
permit(principal in AgentCards::Group::"engineers", action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"rec:pay");

@id("notes-readable")
permit(principal, action == AgentCards::Action::"read_resource", resource) when {{ resource.server == "rec" }};

@id("secret-note")
forbid(principal, action == AgentCards::Action::"read_resource", resource == AgentCards::Resource::"rec://notes/secret");

@id("no-blocked-capability")
forbid(principal, action == AgentCards::Action::"execute_capability", resource == AgentCards::Capability::"blocked_cap");

@id("capabilities-pay-little")
forbid(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"rec:pay")
  when {{ context.surface == "capability" && context.args has amount && context.args.amount > 30 }};

@id("no-big-payments")
forbid(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"rec:pay")
  when {{ context.args has amount && context.args.amount > 1000 }};

@id("greetings-but-not-mallory")
permit(principal, action == AgentCards::Action::"get_prompt", resource == AgentCards::Prompt::"rec:greeting")
  when {{ context.args has name && context.args.name != "mallory" }};

@id("refunds-need-approval")
@approval("required")
permit(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"rec:pay")
  when {{ context.args has to && context.args.to == "refund" }};

@id("vendors-need-engineers")
@approval("required")
@approvers("engineers")
permit(principal, action == AgentCards::Action::"call_tool", resource == AgentCards::Tool::"rec:pay")
  when {{ context.args has to && context.args.to == "vendor" }};
"""


def _servers(tmp: Path) -> dict[str, Any]:
    SCRATCH.mkdir(parents=True, exist_ok=True)
    POLICY_FILE.write_text(POLICIES)
    # Lookups' results may be reused (a cached result is served when no call in it would
    # be refused or paused now: test_a_changed_file_…).
    cache = {"cache": {"tools": {"lookup": {"ttl_s": 600}}}}
    return {"fs": filesystem_server(FILES), "rec": recording_server(RECORDING, agentcards=cache)}


stack = stack_fixture(
    _servers,
    learning=False,
    policy_file=POLICY_FILE,
    approval_timeout_s=APPROVAL_TIMEOUT_S,  # test_approvals.py waits one out
    approval_wait_cap_s=APPROVAL_WAIT_CAP_S,  # and a run past the cap
    **gateway_options(IDENTITY, idp_port=IDP_PORT, gateway_port=GATEWAY_PORT),
)

# Agent code: the write's path is computed at run time from `args`, so no check at admission
# could see it; each call's outcome is caught and returned.
PYTHON = """
out = {}
for name in args["names"]:
    path = args["base"] + "/" + name + ".txt"
    try:
        await mcp.fs.write_file(path=path, content="hi")
        out[name] = "ok"
    except ToolCallError as e:
        out[name] = [e.type, e.policies]
for amount in args["amounts"]:
    try:
        await mcp.rec.pay(amount=amount, to="bob")
        out[str(amount)] = "ok"
    except ToolCallError as e:
        out[str(amount)] = [e.type, e.policies]
return out
"""
TYPESCRIPT = """
const out: Record<string, unknown> = {};
for (const name of args.names) {
  const path = `${args.base}/${name}.txt`;
  try { await mcp.fs.write_file({ path, content: "hi" }); out[name] = "ok"; }
  catch (e) { out[name] = [e.type, e.policies]; }
}
for (const amount of args.amounts) {
  try { await mcp.rec.pay({ amount, to: "bob" }); out[String(amount)] = "ok"; }
  catch (e) { out[String(amount)] = [e.type, e.policies]; }
}
return out;
"""
NO_POLICY: list[str] = []


@pytest.fixture(scope="session")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """One provider (one signing key) for every module of the stack: the gateway keeps the
    keys it fetched, so a second provider's tokens would not verify."""
    with running_provider(
        tmp_path_factory.mktemp("idp"), port=IDP_PORT, resource=RESOURCE
    ) as provider:
        yield provider


def key_named(stack: E2EStack, name: str) -> dict[str, str]:
    with stack.db() as conn:
        _, key = issue_key(conn, tenant_id="acme", name=name)
    return {"Authorization": f"Bearer {key}"}


def run(stack: E2EStack, headers: dict[str, str], code: str, **body: Any) -> dict[str, Any]:
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=90) as client:
        response = client.post(
            "/v1/executions", params={"wait": "true"}, json={"code": code, **body}
        )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def recorded() -> list[dict[str, Any]]:
    if not RECORDING.exists():
        return []
    return [json.loads(line) for line in RECORDING.read_text().splitlines()]


def test_each_call_is_decided_with_its_computed_arguments_in_both_languages(
    stack: E2EStack,
) -> None:
    ci = key_named(stack, "ci")
    outside = FILES / "elsewhere"
    outside.mkdir(exist_ok=True)
    table = {}
    for language, code in (("python", PYTHON), ("typescript", TYPESCRIPT)):
        before = len(recorded())
        args = {"names": [f"{language}-in"], "base": str(SCRATCH.resolve()), "amounts": [50, 5000]}
        inside = run(stack, ci, code, language=language, args=args)
        assert inside["status"] == "succeeded", inside
        args = {"names": [f"{language}-out"], "base": str(outside.resolve()), "amounts": []}
        out = run(stack, ci, code, language=language, args=args)
        table[language] = (inside["result"], out["result"])
        # Allowed: written, paid once. Denied: the file never exists, the server never saw it.
        assert inside["result"] == {
            f"{language}-in": "ok",
            "50": "ok",
            "5000": ["policy_denied", ["no-big-payments"]],
        }
        assert out["result"] == {f"{language}-out": ["policy_denied", NO_POLICY]}
        assert (SCRATCH / f"{language}-in.txt").read_text() == "hi"
        assert not (outside / f"{language}-out.txt").exists()
        assert recorded()[before:] == [{"tool": "pay", "args": {"amount": 50, "to": "bob"}}]
        # The trace names the decision; the run's tool failures and the audit log too.
        ends = [c for c in inside["tool_calls"] if c.get("error")]
        assert [(c["tool"], c["error"]["type"]) for c in ends] == [("rec:pay", "policy_denied")]
        assert "no-big-payments" in ends[0]["error"]["message"]
        _audited(stack, out["id"])  # written in the background, after the reply
        with stack.db() as conn:
            row = conn.execute(
                "SELECT trace FROM executions WHERE id = %s", (out["id"],)
            ).fetchone()
        assert row is not None
        denied = [e["error"] for e in row["trace"] if e["type"] == "tool_end"]
        assert [(e["type"], e["policies"]) for e in denied] == [("policy_denied", [])]


def _audited(stack: E2EStack, execution_id: str) -> None:
    def found() -> bool:
        with stack.db() as conn:
            row = conn.execute(
                "SELECT details FROM audit_log WHERE execution_id = %s AND action = "
                "'tool_call_refused'",
                (execution_id,),
            ).fetchone()
        return row is not None and (row["details"]["type"], row["details"]["policies"]) == (
            "policy_denied",
            [],
        )

    wait_until(found, what="the policy denial in the audit log", timeout_s=10)


def test_keys_by_name_and_people_by_group(stack: E2EStack, idp: IdentityProvider) -> None:
    intern = key_named(stack, "intern")
    alice = {"Authorization": f"Bearer {idp.token('alice')}"}  # engineers
    carol = {"Authorization": f"Bearer {idp.token('carol')}"}  # readers
    code = """
out = {"lookup": await mcp.rec.lookup(key="k")}
try:
    out["pay"] = await mcp.rec.pay(amount=20, to="shop")
except ToolCallError as e:
    out["pay"] = [e.type, e.policies]
return out
"""
    before = len(recorded())
    observed = {
        who: run(stack, headers, code)["result"]
        for who, headers in (("key intern", intern), ("alice", alice), ("carol", carol))
    }
    assert observed == {
        "key intern": {"lookup": "value of k", "pay": ["policy_denied", NO_POLICY]},
        "alice": {"lookup": "value of k", "pay": "paid 20.0 to shop"},
        "carol": {"lookup": "value of k", "pay": ["policy_denied", NO_POLICY]},
    }
    paid = [c for c in recorded()[before:] if c["tool"] == "pay"]
    assert paid == [{"tool": "pay", "args": {"amount": 20, "to": "shop"}}]  # alice's only
    reads = """
out = {"plain": await mcp.rec.read_resource("rec://notes/plain")}
try:
    await mcp.rec.read_resource("rec://notes/secret")
except ToolCallError as e:
    out["secret"] = [e.type, e.policies]
return out
"""
    body = run(stack, intern, reads)
    assert body["status"] == "succeeded", body
    assert body["result"]["secret"] == ["policy_denied", ["secret-note"]]
    assert "note plain" in json.dumps(body["result"]["plain"])
    assert [c["args"] for c in recorded() if c["tool"] == "read"] == [{"name": "plain"}]


async def test_direct_calls_and_submissions_are_decided_too(stack: E2EStack) -> None:
    direct_only, ci = key_named(stack, "direct-only"), key_named(stack, "ci")
    with httpx.Client(base_url=stack.gateway_url, headers=direct_only, timeout=60) as client:
        refused = client.post("/v1/executions", json={"code": "return 1"})
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["type"] == "policy_denied" and error["details"]["policies"] == []
    with stack.db() as conn:  # a refused submission is audited (written before the answer)
        audited = conn.execute(
            "SELECT k.name, a.details FROM audit_log a JOIN api_keys k ON k.id = a.key_id "
            "WHERE a.action = 'submission_refused' ORDER BY a.id DESC LIMIT 1"
        ).fetchone()
    assert audited is not None and audited["name"] == "direct-only"
    assert audited["details"]["policies"] == [] and audited["details"]["language"] == "python"
    before = len(recorded())
    async with direct_session(stack, direct_only) as session:
        small = await session.call_tool("pay", {"amount": 10, "to": "x"})
        big = await session.call_tool("pay", {"amount": 10_000, "to": "x"})
    assert not small.is_error, small
    assert big.is_error
    answer = json.loads(big.content[0].text)["error"]  # type: ignore[union-attr]
    assert answer["type"] == "policy_denied" and "no-big-payments" in answer["message"]
    assert [c["args"]["amount"] for c in recorded()[before:]] == [10]
    # A capability run: decided by its name, and its calls see surface "capability".
    pay = "return await mcp.rec.pay(amount=args['amount'], to='{}')"
    with httpx.Client(base_url=stack.gateway_url, headers=ci, timeout=90) as client:
        for name, to in (("blocked_cap", "blocked"), ("pay_cap", "cap")):
            body = {"code": pay.format(to), "intent": f"pay ({name})", "name": name}
            made = client.post("/v1/capabilities", json=body)
            assert made.status_code == 201, made.text
        blocked = client.post("/v1/capabilities/blocked_cap/execute", json={"args": {"amount": 5}})
        assert blocked.status_code == 403, blocked.text
        assert blocked.json()["error"]["details"]["policies"] == ["no-blocked-capability"]
        runs = {
            amount: client.post(
                "/v1/capabilities/pay_cap/execute", json={"args": {"amount": amount}, "wait": True}
            ).json()
            for amount in (20, 50)
        }
    assert runs[20]["status"] == "succeeded", runs[20]
    assert runs[50]["status"] == "failed" and runs[50]["error"]["type"] == "policy_denied"
    assert "capabilities-pay-little" in runs[50]["error"]["message"]
    assert [c["args"]["to"] for c in recorded()[before:] if c["tool"] == "pay"][-1:] == ["cap"]
    assert [c["args"]["amount"] for c in recorded()[before:] if c["args"].get("to") == "cap"] == [
        20
    ]
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        text = client.get("/metrics").text
    counts = {
        line.split('"')[1]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("agentcards_policy_decisions_total{")
    }
    assert counts.get("allow", 0) >= 1 and counts.get("deny", 0) >= 3, counts


def test_a_changed_file_changes_decisions_and_a_bad_one_keeps_the_last_good_set(
    stack: E2EStack,
) -> None:
    """On change (each process looks at the file within a second) and on `agentcards policy
    reload`, which exits 1 naming file, line and reason when the file is bad; an empty file
    (one being rewritten in place) is bad too: the last good set stays."""
    ci = key_named(stack, "ci")
    code = """
try:
    return await mcp.rec.lookup(key="k")
except ToolCallError as e:
    return [e.type, e.policies]
"""
    assert run(stack, ci, code)["result"] == "value of k"
    # A cached result whose calls the policy in force permits plainly is served; once a
    # policy forbids one of its calls, it is not: the run is decided again.
    again = run(stack, ci, code)
    assert again["result"] == "value of k" and again["cache_hit"] == "execution", again
    # A run that read a resource is not cached: a read is decided by its URI, which a cached
    # result does not keep.
    reading = 'await mcp.rec.read_resource("rec://notes/plain")\n' + code.lstrip()
    assert [run(stack, ci, reading)["cache_hit"] for _ in range(2)] == [None, None]
    closed = (
        POLICIES + '\n@id("lookups-closed")\nforbid(principal, action, '
        'resource == AgentCards::Tool::"rec:lookup");\n'
    )
    try:
        POLICY_FILE.write_text(closed)
        wait_until(
            lambda: run(stack, ci, code)["result"] == ["policy_denied", ["lookups-closed"]],
            what="the changed file decides",
            timeout_s=15,
        )
        bad_line = closed.count("\n") + 2
        POLICY_FILE.write_text(closed + "\npermit(principal, action, resource) when {\n")
        reloaded = policy_cli(stack, "reload")
        assert reloaded.returncode == 1, reloaded
        assert f"{POLICY_FILE}:{bad_line}:" in reloaded.stderr, reloaded.stderr
        assert "keep their last good policies" in reloaded.stderr
        # Truncated in place (an editor between its truncate and its write): never taken
        # for a set that permits nothing.
        POLICY_FILE.write_text("")
        emptied = policy_cli(stack, "reload")
        assert emptied.returncode == 1 and "it is empty" in emptied.stderr, emptied
        time.sleep(1.5)  # past every process's next look at the file
        assert run(stack, ci, code)["result"] == ["policy_denied", ["lookups-closed"]]
        logs = "".join(p.log() for p in stack.procs.values())
        assert "policy reload failed, the last good set stays in force" in logs
        # A good file again: the command makes every process read it at once.
        POLICY_FILE.write_text(POLICIES)
        reloaded = policy_cli(stack, "reload")
        assert reloaded.returncode == 0, reloaded
        told = json.loads(reloaded.stdout)
        assert told["policies"] == 13 and told["processes_told"] >= 2  # gateway and toolhost
        assert run(stack, ci, code)["result"] == "value of k"
    finally:
        POLICY_FILE.write_text(POLICIES)
        os.utime(POLICY_FILE)


# A burst: each turn a marker call both sets permit (it reaches the server: none may be lost
# or sent twice), then a call only a generation's forbid refuses, named in the refusal. It
# stops three turns after the new set first decided (or at 450 turns: 900 calls, under the
# run's limit of 1,000).
BURST = """
seen = []
for turn in range(450):
    await mcp.rec.lookup(key=args["run"] + "-" + str(turn))
    try:
        await mcp.rec.lookup(key="burst")
        seen.append("allowed")
    except ToolCallError as e:
        seen.append(" ".join([e.type, *e.policies]))
    if seen.count("policy_denied gen-b") == 3:
        break
return seen
"""


def _generation(name: str) -> str:
    return POLICIES + (
        f'\n@id("{name}")\nforbid(principal, action == AgentCards::Action::"call_tool", '
        'resource == AgentCards::Tool::"rec:lookup")\n'
        '  when { context.args has key && context.args.key == "burst" };\n'
    )


def _write(text: str) -> None:
    """Replace the policy file as a deploy does: a whole new file renamed over the old one."""
    fresh = POLICY_FILE.with_suffix(".new")
    fresh.write_text(text)
    os.replace(fresh, POLICY_FILE)


def test_a_reload_during_a_burst_decides_each_call_by_one_whole_set(stack: E2EStack) -> None:
    """Two runs call without pause while the file changes from generation A to B (each
    process sees a change within a second; the command's reload is the test above): every
    call is refused by exactly A's forbid or B's,
    never by neither, both, or an error; each run sees A, then only B (one toolhost decides
    its calls in order); every marker call reached the server once; no run was lost or run
    twice."""
    ci = key_named(stack, "ci")
    try:
        _write(_generation("gen-a"))  # each process sees the change within a second
        probe = 'try:\n    await mcp.rec.lookup(key="burst")\nexcept ToolCallError as e:\n    return e.policies'
        wait_until(
            lambda: run(stack, ci, probe)["result"] == ["gen-a"],
            what="generation A in force",
            timeout_s=15,
        )
        with httpx.Client(base_url=stack.gateway_url, headers=ci, timeout=60) as client:
            runs = {}
            for name in ("burst-1", "burst-2"):
                made = client.post("/v1/executions", json={"code": BURST, "args": {"run": name}})
                assert made.status_code == 202, made.text
                runs[name] = made.json()["id"]

        def markers(name: str) -> list[str]:
            return [
                c["args"]["key"]
                for c in recorded()
                if c["args"].get("key", "").startswith(name + "-")
            ]

        # Both runs are calling, decided by A, when the file changes.
        wait_until(
            lambda: all(f"{name}-3" in markers(name) for name in runs),
            what="both bursts under way",
            timeout_s=60,
        )
        _write(_generation("gen-b"))
        for name, execution_id in runs.items():
            wait_until(
                lambda execution_id=execution_id: (
                    _view(stack, ci, execution_id)["status"] not in ("queued", "running")
                ),
                what=f"{name} ends",
                timeout_s=90,
            )
            done = _view(stack, ci, execution_id)
            assert done["status"] == "succeeded" and done["attempts"] == 1, done
            seen = done["result"]
            olds = seen.count("policy_denied gen-a")
            assert (
                olds >= 3 and seen == ["policy_denied gen-a"] * olds + ["policy_denied gen-b"] * 3
            ), seen
            assert markers(name) == [f"{name}-{turn}" for turn in range(len(seen))]
    finally:
        _write(POLICIES)  # generation A or B forbids only these calls: no later test waits


def _view(stack: E2EStack, headers: dict[str, str], execution_id: str) -> dict[str, Any]:
    with httpx.Client(base_url=stack.gateway_url, headers=headers, timeout=60) as client:
        got = client.get(f"/v1/executions/{execution_id}")
    assert got.status_code == 200, got.text
    body: dict[str, Any] = got.json()
    return body


@contextlib.asynccontextmanager
async def direct_session(stack: E2EStack, headers: dict[str, str]) -> AsyncIterator[ClientSession]:
    """An MCP SDK client session on the recording server's direct endpoint."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{stack.gateway_url}/mcp/servers/rec", http_client=http) as (
            read,
            write,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def policy_cli(stack: E2EStack, *argv: str) -> subprocess.CompletedProcess[str]:
    """`agentcards policy …` with the stack's settings."""
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli.main", "policy", *argv],
        env=settings_env(stack.settings),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
