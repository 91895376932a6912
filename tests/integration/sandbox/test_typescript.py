"""TypeScript in the real sandbox: the API agents use, and the adversarial suite rewritten in TypeScript.

Each attack runs in Deno inside the same confinement as Python (namespaces, fs view,
Landlock, seccomp, cgroup, rlimits) and reports what it observed; the assertions are
what a user would notice (a secret in the result, a connection made, a host file
written, the host left with stray processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from shared.sandbox import fsplan
from shared.sandbox.bridge import CapabilitySource
from shared.sandbox.launcher import get_launcher
from shared.sandbox.limits import SandboxLimits
from shared.sandbox.outcome import ExecutionOutcome
from shared.sandbox.tools import LocalToolRegistry, ToolResult
from tests.integration.sandbox.conftest import SECRET, Run

# Collects each attempt's outcome as "OK:<value>" or "<ErrorName>: <message>".
ATTEMPT = """
const out: Record<string, string> = {};
async function attempt(name: string, fn: () => unknown): Promise<void> {
  try {
    out[name] = "OK:" + String(JSON.stringify(await fn()) ?? "").slice(0, 200);
  } catch (e) {
    out[name] = `${(e as Error)?.name}: ${String((e as Error)?.message).slice(0, 200)}`;
  }
}
"""


@pytest.fixture
def ts(run: Run) -> Run:
    """Run TypeScript with the suite's limits and tools."""

    async def _ts(code: str, **kwargs: Any) -> ExecutionOutcome:
        return await run(code, language="typescript", **kwargs)

    return _ts


async def attempts(ts: Run, body: str, **kwargs: Any) -> dict[str, str]:
    outcome = await ts(ATTEMPT + body + "\nreturn out;", **kwargs)
    assert outcome.status == "succeeded", outcome.error
    assert SECRET not in json.dumps(outcome.result) + outcome.stdout
    assert isinstance(outcome.result, dict)
    return outcome.result


def assert_refused(results: dict[str, str]) -> None:
    leaked = {name: value for name, value in results.items() if value.startswith("OK:")}
    assert not leaked, leaked


# ---- the API --------------------------------------------------------------------------


async def test_the_issue_example_runs_with_tools_console_progress_and_a_result(ts: Run) -> None:
    events: list[dict[str, Any]] = []
    code = """
const r = await mcp.t.echo({ a: args.a, b: 2 });
const dashed = await mcp["t"]["echo"]({ dashed: true });
console.log("adding", args.a);
console.error("to stderr", { nested: [1, 2] });
progress("half way", 1, 2);
const typed: { a: number } = { a: 1 };
return { r, dashed, typed };
"""
    outcome = await ts(code, args={"a": 5}, on_event=events.append)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {"r": {"a": 5, "b": 2}, "dashed": {"dashed": True}, "typed": {"a": 1}}
    assert outcome.stdout == "adding 5\nto stderr { nested: [ 1, 2 ] }\n"
    assert [e["tool"] for e in outcome.trace if e["type"] == "tool_start"] == ["t:echo", "t:echo"]
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and progress[0]["message"] == "half way"


async def test_a_failing_tool_is_a_typed_tool_call_error(ts: Run) -> None:
    caught = await ts(
        """
try { await mcp.t.fail({}); } catch (e) {
  if (e instanceof ToolCallError) return { type: e.type, tool: e.tool };
}
return "not caught";
"""
    )
    assert caught.status == "succeeded", caught.error
    assert caught.result == {"type": "tool_error", "tool": "t:fail"}
    uncaught = await ts("await mcp.t.nope({});")
    assert uncaught.status == "failed"
    assert uncaught.error is not None and uncaught.error["type"] == "tool_not_allowed"


async def test_resources_are_read_through_the_bridge(ts: Run, registry: LocalToolRegistry) -> None:
    class WithResources(LocalToolRegistry):
        async def read_resource(self, server: str, uri: str, deadline: float) -> ToolResult:
            return ToolResult.success({"contents": [{"uri": uri, "text": f"from {server}"}]})

    backend = WithResources()
    backend.register("t:echo", lambda **kw: kw)
    outcome = await ts(
        """
const doc = await mcp.t.read_resource("demo://doc");
let refused = "";
try { await mcp.other.read_resource("demo://doc"); } catch (e) { refused = (e as ToolCallError).type; }
return { text: doc.contents[0].text, refused };
""",
        tools=backend.specs(),
        backend=backend,
    )
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == {"text": "from t", "refused": "tool_not_allowed"}


async def test_syntax_errors_name_the_agents_line_and_column(ts: Run) -> None:
    unclosed = await ts("if (true) {\nreturn 1;")
    assert unclosed.error is not None and unclosed.error["type"] == "syntax_error"
    assert unclosed.error["details"] == {"line": 2, "column": 10, "text": "return 1;"}
    outcome = await ts("const a: number = 1;\nconst b = a +;\nreturn b;")
    assert outcome.error is not None and outcome.error["type"] == "syntax_error", outcome.error
    assert outcome.error["details"]["line"] == 2
    assert outcome.error["details"]["column"] == 14
    assert "line 2" in outcome.error["message"]


async def test_runtime_errors_show_the_agents_own_line(ts: Run) -> None:
    outcome = await ts("const x = 1;\nthrow new Error('boom');")
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    assert outcome.error["message"] == "Error: boom"
    assert "<code>:2:" in outcome.error["traceback"]


async def test_a_refused_fetch_says_to_use_tools(ts: Run) -> None:
    outcome = await ts("return await fetch('https://example.com/');")
    assert outcome.error is not None and outcome.error["type"] == "runtime_error"
    assert "NotCapable" in outcome.error["message"]
    assert "mcp.<server>.<tool>" in outcome.error["message"]


async def test_a_result_json_cannot_hold_is_refused_by_path(ts: Run) -> None:
    outcome = await ts("return { when: [1, new Date(0)] };")
    assert outcome.error is not None and outcome.error["type"] == "result_not_json"
    assert outcome.error["details"]["path"] == 'result["when"][1]'
    assert "toISOString" in outcome.error["message"]
    nan = await ts("return { x: NaN };")
    assert nan.error is not None and nan.error["type"] == "result_not_json"


async def test_typescript_capabilities_run_inline_and_are_traced(ts: Run) -> None:
    caps = {
        "double": CapabilitySource(id="cap-double", code="return (args.x as number) * 2;"),
        "echo_twice": CapabilitySource(
            id="cap-echo",
            code="const a = await mcp.t.echo({ v: args.v });\n"
            "return [a, await capabilities.double({ x: args.v })];",
        ),
    }
    outcome = await ts("return await capabilities.echo_twice({ v: 21 });", capability_sources=caps)
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == [{"v": 21}, 42]
    names = [e.get("name") for e in outcome.trace if e.get("type") == "capability_start"]
    assert names == ["echo_twice", "double"]
    tools = [e for e in outcome.trace if e["type"] == "tool_start"]
    assert [(e["tool"], e["parent"]) for e in tools] == [("t:echo", "cap-echo")]


# ---- the adversarial suite --------------------------------------------------------------


async def test_the_deno_started_ahead_of_a_run_is_inside_its_cgroup(
    ts: Run, limits: SandboxLimits
) -> None:
    await ts("return 1;")  # leaves a TypeScript spare behind: a confined child with Deno up
    launcher = get_launcher()
    key = json.dumps(launcher._child_config(limits, "typescript"), sort_keys=True)
    deadline = time.monotonic() + 20
    deno: list[int] = []
    while time.monotonic() < deadline and not deno:
        raw = launcher._ready.get(key)
        if raw is not None:
            with contextlib.suppress(psutil.Error):
                kids = psutil.Process(raw.pid).children(recursive=True)
                deno = [k.pid for k in kids if k.name().startswith("deno")]
        await asyncio.sleep(0.05)
    assert deno, "no waiting Deno"
    assert raw is not None and raw.cgroup is not None
    assert set(deno) <= set(raw.cgroup.pids())  # capped by memory.max and pids.max too


async def test_deno_runs_under_every_os_layer_of_the_python_sandbox(ts: Run) -> None:
    outcome = await ts("return 1;")
    assert outcome.status == "succeeded", outcome.error
    expected = {
        "namespaces", "private_tmp", "fresh_proc", "rlimits", "capabilities_dropped",
        "no_new_privs", "landlock", "seccomp", "cgroup", "clean_env", "filesystem_view",
        "unprivileged_user",
    }  # fmt: skip
    assert {name for name, up in outcome.layers.items() if up} >= expected, outcome.layers


async def test_host_files_and_secrets_are_out_of_reach(
    ts: Run, host_intact, tmp_path: Path
) -> None:
    planted = tmp_path / "secret.json"
    planted.write_text(json.dumps({"secret": SECRET}))
    planted.chmod(0o644)
    tmp_path.chmod(0o755)
    results = await attempts(
        ts,
        f"""
await attempt("read passwd", () => Deno.readTextFileSync("/etc/passwd"));
await attempt("read planted", () => Deno.readTextFileSync({str(planted)!r}));
await attempt("import planted", () => import({("file://" + str(planted))!r}, {{ with: {{ type: "json" }} }}));
await attempt("read environ", () => Deno.readTextFileSync("/proc/1/environ"));
await attempt("list root", () => [...Deno.readDirSync("/")].map((e) => e.name));
await attempt("env get", () => Deno.env.get("AGENTCARDS_TEST_SECRET"));
await attempt("env all", () => Deno.env.toObject());
await attempt("node env", async () => (await import("node:process")).env.AGENTCARDS_DATABASE_URL ?? null);
await attempt("node fs", async () => (await import("node:fs")).readFileSync("/etc/hostname", "utf8"));
""",
    )
    # node:process.env without --allow-env is an empty object: no value, no secret.
    node_env = results.pop("node env")
    assert node_env in ("OK:null", "OK:") or "NotCapable" in node_env, node_env
    assert_refused(results)
    await host_intact()


async def test_writes_outside_and_inside_tmp_are_refused(
    ts: Run, host_intact, tmp_path: Path
) -> None:
    target = tmp_path / "written"
    tmp_path.chmod(0o777)
    results = await attempts(
        ts,
        f"""
await attempt("host tmp", () => Deno.writeTextFileSync({str(target)!r}, "x"));
await attempt("etc", () => Deno.writeTextFileSync("/etc/agentcards", "x"));
await attempt("private tmp", () => Deno.writeTextFileSync("/tmp/x", "x"));
await attempt("mkdir", () => Deno.mkdirSync("/tmp/d"));
await attempt("node fs", async () => (await import("node:fs")).writeFileSync("/tmp/y", "x"));
""",
    )
    assert_refused(results)
    assert not target.exists()
    await host_intact()


async def test_network_is_unreachable(ts: Run, host_intact, listeners: dict[str, object]) -> None:
    results = await attempts(
        ts,
        """
await attempt("fetch loopback", async () => (await fetch(`http://127.0.0.1:${args.http}/`)).status);
await attempt("fetch outbound", async () => (await fetch("http://1.1.1.1/")).status);
await attempt("connect loopback", async () => (await Deno.connect({ hostname: "127.0.0.1", port: args.tcp })).remoteAddr);
await attempt("connect outbound", async () => (await Deno.connect({ hostname: "1.1.1.1", port: 80 })).remoteAddr);
await attempt("websocket", () => new Promise((ok, fail) => {
  const ws = new WebSocket(`ws://127.0.0.1:${args.http}/`);
  ws.onopen = () => ok("open");
  ws.onerror = () => fail(new Error("websocket error"));
}));
await attempt("listen", () => Deno.listen({ port: 0 }).addr);
await attempt("dns", () => Deno.resolveDns("example.com", "A"));
await attempt("node net", async () => {
  const net = await import("node:net");
  return await new Promise((ok, fail) => {
    const s = net.connect(args.tcp, "127.0.0.1", () => ok("connected"));
    s.on("error", fail);
  });
});
""",
        args=listeners,
    )
    assert_refused(results)
    await host_intact()


async def test_processes_ffi_workers_and_remote_code_are_refused(ts: Run, host_intact) -> None:
    results = await attempts(
        ts,
        """
await attempt("command", async () => new TextDecoder().decode((await new Deno.Command("id").output()).stdout));
await attempt("command by path", async () => (await new Deno.Command(args.deno, { args: ["--version"] }).output()).code);
await attempt("node child_process", async () => (await import("node:child_process")).execSync("id").toString());
await attempt("dlopen", () => Deno.dlopen("libc.so.6", { getpid: { parameters: [], result: "i32" } }).symbols.getpid());
await attempt("npm import", () => import("npm:left-pad@1.3.0"));
await attempt("jsr import", () => import("jsr:@std/path@1"));
await attempt("https import", () => import("https://deno.land/std@0.224.0/path/mod.ts"));
await attempt("file import", () => import("file:///etc/passwd"));
await attempt("npm via data module", () => import("data:application/javascript,export * from 'npm:left-pad@1.3.0'"));
await attempt("worker env", () => new Promise((ok, fail) => {
  const src = "self.postMessage(Deno.env.get('AGENTCARDS_TEST_SECRET') ?? 'none')";
  const w = new Worker(`data:text/javascript,${encodeURIComponent(src)}`, { type: "module" });
  w.onmessage = (e) => (e.data === "none" ? fail(new Error("no env in the worker")) : ok(e.data));
  w.onerror = (e) => { e.preventDefault(); fail(new Error(`worker error: ${e.message}`)); };
}));
await attempt("kill", () => Deno.kill(1, "SIGKILL"));
""",
        args={"deno": fsplan.find_deno()},  # a binary that is inside the sandbox's view
    )
    assert_refused(results)
    await host_intact()


async def test_memory_bomb_is_a_memory_limit(ts: Run, host_intact) -> None:
    heap = await ts("const a: number[][] = [];\nfor (;;) a.push(new Array(1e6).fill(1.5));")
    assert heap.error is not None and heap.error["type"] == "memory_limit", heap.error
    buffers = await ts("const a = [];\nfor (;;) a.push(new Uint8Array(64 << 20).fill(1));")
    assert buffers.status == "failed"
    assert buffers.error is not None and buffers.error["type"] == "memory_limit", buffers.error
    await host_intact()


async def test_a_heap_of_small_objects_is_a_memory_limit_whatever_reason_v8_gives(
    ts: Run, host_intact
) -> None:
    # V8 ends this one with "Fatal JavaScript out of memory: CALL_AND_RETRY_LAST" (a slow GC
    # gives "Ineffective mark-compacts near heap limit"), not "Reached heap limit": it was
    # once reported as a runtime error carrying V8's C stack trace.
    outcome = await ts(
        "const live: unknown[] = [];\nfor (let i = 0; ; i++) live.push({ i });",
        limits=SandboxLimits(wall_time_s=120),
    )
    assert outcome.error is not None and outcome.error["type"] == "memory_limit", outcome.error
    assert "AGENTCARDS_SANDBOX_MEMORY_MB" in outcome.error["message"]
    await host_intact()


async def test_cpu_spin_ends_at_the_wall_clock_and_the_cpu_limit(ts: Run, host_intact) -> None:
    wall = await ts("for (;;) {}")
    assert wall.status == "timeout"
    cpu = await ts("for (;;) {}", limits=SandboxLimits(wall_time_s=20, cpu_time_s=1))
    assert cpu.error is not None and cpu.error["type"] == "cpu_limit", cpu.error
    await host_intact()


async def test_output_flood_is_capped(ts: Run, host_intact) -> None:
    limits = SandboxLimits(wall_time_s=10, stdout_bytes=64 << 10)
    outcome = await ts(
        "const line = 'x'.repeat(1000);\nfor (let i = 0; i < 20000; i++) console.log(line);\nreturn 1;",
        limits=limits,
    )
    assert outcome.status == "succeeded", outcome.error
    assert outcome.stdout_truncated
    assert len(outcome.stdout.encode()) <= 64 << 10
    await host_intact()


def _raw(frame: str) -> str:
    return f"""
const body = new TextEncoder().encode(JSON.stringify({frame}));
const head = new Uint8Array(4);
new DataView(head.buffer).setUint32(0, body.length);
Deno.stdout.writeSync(head);
Deno.stdout.writeSync(body);
await new Promise((r) => setTimeout(r, 500));
return "ignored";
"""


async def test_a_forged_tool_call_is_refused_like_any_other(ts: Run) -> None:
    frame = '{ op: "tool_call", id: 99, tool: "forbidden:tool", parent: null, args: {} }'
    outcome = await ts(_raw(frame))
    assert outcome.status == "succeeded", outcome.error
    ended = [e for e in outcome.trace if e["type"] == "tool_end"]
    assert [e["error"]["type"] for e in ended] == ["tool_not_allowed"]


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (
            '{ op: "done", ok: false, error: { type: "sandbox_unavailable", message: "x" } }',
            "protocol_error",
        ),
        ('{ op: "launch_missiles" }', "protocol_error"),
        (
            '{ op: "tool_call", id: 5, tool: "t:echo", parent: "cap-forged", args: {} }',
            "protocol_error",
        ),
    ],
)
async def test_forged_bridge_frames_are_protocol_errors(ts: Run, frame: str, expected: str) -> None:
    outcome = await ts(_raw(frame))
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == expected, outcome.error
    assert not [e for e in outcome.trace if e["type"] == "tool_end" and not e.get("error")]


def test_the_cli_runs_a_ts_file_like_a_python_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = tmp_path / "job.ts"
    code.write_text("const n: number = args.n * 2;\nconsole.log('n', n);\nreturn { n };\n")
    done = subprocess.run(
        [sys.executable, "-m", "deploy.cli.main", "sandbox", "run", str(code),
         "--args", '{"n": 21}', "--timeout", "10"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[3],
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, result
    assert result["result"] == {"n": 42} and result["stdout"] == "n 42\n"
    assert all(result["layers"][name] for name in ("filesystem_view", "seccomp", "landlock"))


async def test_result_size_tool_call_count_and_tool_args_are_capped(ts: Run) -> None:
    big = await ts("return 'x'.repeat(64 << 10);", limits=SandboxLimits(result_bytes=16 << 10))
    assert big.error is not None and big.error["type"] == "output_limit", big.error
    calls = await ts(
        "for (let i = 0; i < 3; i++) await mcp.t.echo({ i });",
        limits=SandboxLimits(wall_time_s=5, max_tool_calls=2),
    )
    assert calls.error is not None and calls.error["type"] == "tool_call_limit", calls.error
    args = await ts(
        "await mcp.t.echo({ x: 'y'.repeat(4096) });",
        limits=SandboxLimits(wall_time_s=5, tool_args_bytes=1024),
    )
    assert args.error is not None and args.error["type"] == "tool_args_too_large", args.error


async def test_code_that_exits_deno_itself_ends_without_a_result(ts: Run, host_intact) -> None:
    quiet = await ts("Deno.exit(0);")
    assert quiet.status == "failed"
    assert quiet.error is not None and quiet.error["type"] == "runtime_error"
    loud = await ts("Deno.exit(3);")
    assert loud.error is not None and loud.error["type"] == "runtime_error"
    await host_intact()


# ---- attacks on the child's own plumbing ---------------------------------------------------

POLLUTION = """
const before = await Promise.all([mcp.t.echo({ i: 1 }), mcp.t.echo({ i: 2 })]);
const forged = { op: "tool_call", id: 1000, tool: "forbidden:tool", parent: null, args: {} };
const realStringify = JSON.stringify;
const realParse = JSON.parse;
const realGet = Map.prototype.get;
// Every frame the child sends would become a forged call; every reply would name call 3;
// replies for calls 3 and 4 would be looked up under each other's id.
JSON.stringify = ((v: any, ...rest: any[]) =>
  realStringify(v?.op === "tool_call" ? forged : v, ...rest)) as typeof JSON.stringify;
JSON.parse = ((t: string) => {
  const v = realParse(t);
  if (v?.op === "tool_result") v.id = 3;
  return v;
}) as typeof JSON.parse;
(Object.prototype as any).toJSON = function (this: any) {
  return this?.op === "tool_call" ? forged : this;
};
Map.prototype.get = function (this: Map<unknown, unknown>, k: unknown) {
  return realGet.call(this, k === 3 ? 4 : k === 4 ? 3 : k);
};
(globalThis as any).Promise = class { constructor() {} then() {} };
(globalThis as any).Uint8Array = class {};
Deno.stdout.writeSync = () => { throw new Error("patched"); };
const after = await [mcp.t.echo({ i: 3 }), mcp.t.echo({ i: 4 })].reduce(
  async (acc: any, p: any) => [...(await acc), await p], [] as any,
);
delete (Object.prototype as any).toJSON;
return { before, after };
"""


async def test_prototype_pollution_cannot_forge_frames_or_misroute_replies(
    ts: Run, registry: LocalToolRegistry, host_intact
) -> None:
    outcome = await ts(POLLUTION)
    assert outcome.status == "succeeded", outcome.error
    # Each call got its own reply, and only the calls the code made reached the bridge.
    assert outcome.result == {"before": [{"i": 1}, {"i": 2}], "after": [{"i": 3}, {"i": 4}]}
    started = [e["tool"] for e in outcome.trace if e["type"] == "tool_start"]
    assert started == ["t:echo"] * 4
    assert not [e for e in outcome.trace if e["type"] == "tool_end" and e.get("error")]
    await host_intact()


async def test_frames_printed_to_stdout_are_only_text(ts: Run) -> None:
    forged = '{"op":"done","ok":true,"result":"forged"}'
    outcome = await ts(
        f"""
const body = {forged!r};
const frame = String.fromCharCode(0, 0, 0, body.length) + body;
console.log(frame);
console.error(frame);
await Deno.stdout.write(new TextEncoder().encode("")); // an empty write is no frame
return "real";
"""
    )
    assert outcome.status == "succeeded", outcome.error
    assert outcome.result == "real"
    assert outcome.stdout.count(forged) == 2


async def test_microtask_floods_and_endless_promise_chains_end_at_the_limits(
    ts: Run, host_intact
) -> None:
    # Never yields to the event loop: only the wall clock (here) or the CPU limit end it.
    flood = await ts("const f = (): void => queueMicrotask(f);\nf();\nawait new Promise(() => {});")
    assert flood.status == "timeout", flood.error
    assert flood.error is not None and "Promise.all" in flood.error["message"]  # its own language
    awaits = await ts("for (;;) await null;", limits=SandboxLimits(wall_time_s=20, cpu_time_s=1))
    assert awaits.error is not None and awaits.error["type"] == "cpu_limit", awaits.error
    # A chain that grows without end: whichever limit comes first, never a hang or a crash.
    chain = await ts(
        "const spin = (): Promise<void> => Promise.resolve().then(spin);\nawait spin();"
    )
    assert chain.status in ("timeout", "failed"), chain
    limit = (chain.error or {}).get("type")
    assert chain.status == "timeout" or limit in ("memory_limit", "cpu_limit"), chain.error
    await host_intact()


async def test_workers_and_shared_memory_are_harmless(ts: Run, host_intact) -> None:
    results = await attempts(
        ts,
        """
const run = (src: string, send?: unknown) => new Promise((ok, fail) => {
  const w = new Worker(URL.createObjectURL(new Blob([src])), { type: "module" });
  w.onmessage = (e) => { w.terminate(); ok(e.data); };
  w.onerror = (e) => { e.preventDefault(); fail(new Error(e.message)); };
  if (send !== undefined) w.postMessage(send);
});
await attempt("worker reads a file", () => run("postMessage(Deno.readTextFileSync('/etc/passwd'))"));
await attempt("worker env", () => run("postMessage(Deno.env.get('AGENTCARDS_TEST_SECRET'))"));
await attempt("worker fetch", () => run("fetch('http://1.1.1.1/').then((r) => postMessage(r.status))"));
await attempt("worker command", () => run("postMessage(new Deno.Command('id').outputSync().code)"));
await attempt("worker dlopen", () => run("postMessage(String(Deno.dlopen('libc.so.6', {})))"));
""",
    )
    assert_refused(results)
    # Shared memory works inside the run (it is the run's own), and a worker's spin or a
    # wait that never ends is cut by the same wall clock, leaving nothing behind.
    shared = await ts(
        """
const sab = new SharedArrayBuffer(8);
const a = new Int32Array(sab);
const w = new Worker(URL.createObjectURL(new Blob([
  "onmessage = (e) => { Atomics.store(new Int32Array(e.data), 0, 42); postMessage(0); }",
])), { type: "module" });
await new Promise((ok) => { w.onmessage = ok; w.postMessage(sab); });
w.terminate();
return Atomics.load(a, 0);
"""
    )
    assert shared.status == "succeeded" and shared.result == 42, shared.error
    spin = await ts(
        """
for (let i = 0; i < 2; i++) new Worker(URL.createObjectURL(new Blob(["for (;;) {}"])), { type: "module" });
Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
"""
    )
    # Threads count against the run's task limit (16 by default, Deno's own included), so
    # even a few workers may find none left: that ending is contained too, and says so.
    ended = spin.status == "timeout" or (spin.error or {}).get("type") == "cpu_limit"
    assert ended or "start fewer workers" in (spin.error or {}).get("message", ""), spin.error
    # Threads are tasks of the run's cgroup: a flood of workers meets its limit.
    flood = await ts(
        'for (;;) new Worker(URL.createObjectURL(new Blob(["for (;;) {}"])), { type: "module" });'
    )
    assert flood.status != "succeeded" and flood.error is not None, flood
    # Either the Worker constructor throws in the code (at its own line), or Deno ends when
    # a worker's threads cannot start: both say why.
    if flood.status != "timeout":
        message = flood.error["message"]
        assert "Resource temporarily unavailable" in message or "start fewer workers" in message
        assert "<code>:1:" in flood.error.get("traceback", "<code>:1:"), flood.error
    await host_intact()


async def test_symlinks_and_links_cannot_reach_host_files(
    ts: Run, host_intact, tmp_path: Path
) -> None:
    planted = tmp_path / "secret.txt"
    planted.write_text(SECRET)
    planted.chmod(0o644)
    tmp_path.chmod(0o755)
    results = await attempts(
        ts,
        f"""
await attempt("symlink to host file", () => Deno.symlinkSync({str(planted)!r}, "/tmp/s"));
await attempt("node symlink", async () => (await import("node:fs")).symlinkSync("/etc/passwd", "/tmp/n"));
await attempt("hard link", () => Deno.linkSync("/tmp/.agentcards/main.js", "/tmp/h"));
await attempt("through /proc/self/root", () => Deno.readTextFileSync("/proc/self/root{planted}"));
await attempt("through /proc/1/root", () => Deno.readTextFileSync("/proc/1/root/etc/passwd"));
await attempt("through /proc/self/cwd", () => Deno.readTextFileSync("/proc/self/cwd/main.js"));
await attempt("readlink", () => Deno.readLinkSync("/proc/self/exe"));
await attempt("import through /proc", () => import("file:///proc/self/root{planted}"));
""",
    )
    assert_refused(results)
    await host_intact()
