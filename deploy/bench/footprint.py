"""`agentcards bench footprint`: what an idle stack with five published servers holds in memory.

A stack of this checkout starts in a throwaway home with ``everything``, ``filesystem`` and
``memory`` (npm) and ``time`` and ``git`` (PyPI), whichever of them this machine has
(``missing_servers`` names the others). Once healthy, a round of tool searches warms every
process that embeds, the stack settles, and each process' PSS, USS and RSS are read from
``/proc/<pid>/smaps_rollup``: PSS counts a page shared by n processes as 1/n in each, so the
stack's PSS is what it costs the machine. Our processes (the supervisor, the children
`agentcards up` starts and theirs, the sandbox's zygote and spares), Postgres and Redis make
``total``; the MCP servers (the toolhost's children) are listed apart and not counted.

PSS also divides a library's pages with processes outside the stack that map it (another
stack's torch, say): ``other_torch_mappers`` says how many there were, and USS (pages this
process alone maps) is the floor that no neighbour can lower.

Search latency: ``POST /v1/tools/search`` for the real-server requests, each query once per
stack (the gateway caches repeated ones), one at a time. With ``--compare REF`` a stack of
REF ("old") is measured alone first, then both run at once for the latency (queries
alternate between them), then this checkout's ("new") is measured alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from deploy.bench.datasets import DATA
from deploy.bench.footprint_pass import after_a_pass
from deploy.bench.held import HeldStack, checkout, held_stack
from deploy.launcher.state import StackState

ROOT = Path(__file__).resolve().parents[2]
TARGET_MIB = 1536  # the idle stack, MCP servers not counted
SETTLE_S = 8.0  # after the warm-up: background loads (the learning worker's model) finish
NPM_PREFIX_ENV = "AGENTCARDS_TEST_NPM_PREFIX"
KIB_PER_MIB = 1024


@dataclass(frozen=True)
class Sample:
    """One process' memory, in KiB, from its smaps_rollup."""

    pid: int
    role: str
    command: str
    pss: int
    uss: int
    rss: int
    torch: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "role": self.role,
            "command": self.command,
            "pss_mib": _mib(self.pss),
            "uss_mib": _mib(self.uss),
            "rss_mib": _mib(self.rss),
            "maps_torch": self.torch,
        }


def _mib(kib: int) -> float:
    return round(kib / KIB_PER_MIB, 1)


# --- the servers -------------------------------------------------------------------------


def five_servers(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """``mcpServers`` entries for the five published servers this machine has, and the
    names of those it lacks (npm ones from $AGENTCARDS_TEST_NPM_PREFIX or PATH)."""
    npm_bin = (
        Path(os.environ.get(NPM_PREFIX_ENV, ROOT / ".cache" / "npm")) / "node_modules" / ".bin"
    )
    files = folder / "files"
    files.mkdir(parents=True, exist_ok=True)
    (files / "notes.txt").write_text("Meeting at ten.\n")
    repo = folder / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=False, capture_output=True)
    wanted: dict[str, tuple[str | None, dict[str, Any]]] = {
        "everything": (_binary("mcp-server-everything", npm_bin), {"args": ["stdio"]}),
        "filesystem": (_binary("mcp-server-filesystem", npm_bin), {"args": [str(files)]}),
        "memory": (
            _binary("mcp-server-memory", npm_bin),
            {"env": {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")}},
        ),
        "time": (_binary("mcp-server-time", None), {"args": ["--local-timezone", "UTC"]}),
        "git": (_binary("mcp-server-git", None), {"args": ["--repository", str(repo)]}),
    }
    servers = {
        name: {"command": command, **entry}
        for name, (command, entry) in wanted.items()
        if command is not None
    }
    return servers, [name for name in wanted if name not in servers]


def _binary(name: str, folder: Path | None) -> str | None:
    if folder is not None and (folder / name).exists():
        return str(folder / name)
    return shutil.which(name)


# --- measuring -----------------------------------------------------------------------------


def read_rollup(pid: int) -> dict[str, int]:
    """The KiB fields of ``/proc/<pid>/smaps_rollup`` (Rss, Pss, Private_Clean, …)."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            match = re.match(r"^(\w+):\s+(\d+) kB", line)
            if match:
                fields[match[1]] = int(match[2])
    return fields


def maps_torch(pid: int) -> bool:
    """True when the process has torch's C++ library mapped (it imported torch)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libtorch_cpu" in line for line in f)
    except OSError:
        return False


def _sample(proc: psutil.Process, role: str) -> Sample | None:
    try:
        rollup = read_rollup(proc.pid)
        command = " ".join(proc.cmdline())[:160]
    except (OSError, psutil.Error):
        return None  # ended meanwhile (a spare that ran, say)
    return Sample(
        pid=proc.pid,
        role=role,
        command=command,
        pss=rollup.get("Pss", 0),
        uss=rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0),
        rss=rollup.get("Rss", 0),
        torch=maps_torch(proc.pid),
    )


def _postmaster(pgdata: str | None) -> int | None:
    if not pgdata:
        return None
    try:
        first = (Path(pgdata) / "postmaster.pid").read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def stack_samples(state: StackState) -> list[Sample]:
    """Every process of the stack ``state`` records, with its role: a child's own name for it
    and its descendants, ``mcp-server`` for the toolhost's children."""
    samples: list[Sample] = []

    def add(proc: psutil.Process, role: str) -> None:
        sample = _sample(proc, role)
        if sample is not None:
            samples.append(sample)

    roots: list[tuple[str, int | None]] = [
        ("supervisor", state.supervisor_pid),
        *state.processes.items(),
        ("redis", state.embedded_redis_pid),
        ("postgres", _postmaster(state.embedded_postgres)),
    ]
    for role, pid in roots:
        if pid is None or not psutil.pid_exists(pid):
            continue
        root = psutil.Process(pid)
        add(root, role)
        if role == "supervisor":
            continue  # its children are the roots above
        for child in root.children(recursive=True):
            add(child, "mcp-server" if role == "toolhost" else role)
    return samples


def other_torch_mappers(samples: list[Sample]) -> int:
    """Processes outside the stack that map torch (they share its library pages' PSS)."""
    ours = {s.pid for s in samples}
    return sum(1 for p in psutil.pids() if p not in ours and maps_torch(p))


def summarise(samples: list[Sample], *, others: int) -> dict[str, Any]:
    """Per process, per role and in total; MCP servers apart."""
    counted = [s for s in samples if s.role != "mcp-server"]
    servers = [s for s in samples if s.role == "mcp-server"]
    by_role: dict[str, dict[str, Any]] = {}
    for s in counted:
        row = by_role.setdefault(s.role, {"processes": 0, "pss": 0, "uss": 0, "rss": 0})
        row["processes"] += 1
        row["pss"] += s.pss
        row["uss"] += s.uss
        row["rss"] += s.rss
    total_pss = sum(s.pss for s in counted)
    return {
        "total_pss_mib": _mib(total_pss),
        "total_uss_mib": _mib(sum(s.uss for s in counted)),
        "total_rss_mib": _mib(sum(s.rss for s in counted)),
        "target_pss_mib": TARGET_MIB,
        "meets_target": total_pss / KIB_PER_MIB < TARGET_MIB,
        "processes_mapping_torch": sum(1 for s in counted if s.torch),
        "other_torch_mappers": others,
        "by_role": {
            role: {
                "processes": row["processes"],
                "pss_mib": _mib(row["pss"]),
                "uss_mib": _mib(row["uss"]),
                "rss_mib": _mib(row["rss"]),
            }
            for role, row in sorted(by_role.items(), key=lambda kv: -kv[1]["pss"])
        },
        "processes": [s.as_json() for s in sorted(counted, key=lambda s: -s.pss)],
        "mcp_servers": {
            "pss_mib": _mib(sum(s.pss for s in servers)),
            "processes": [s.as_json() for s in servers],
        },
    }


def measure(run_dir: Path) -> dict[str, Any]:
    """The memory table of the stack whose state file is in ``run_dir``."""
    state = StackState.load(run_dir)
    if state is None:
        raise RuntimeError(f"no stack state in {run_dir}")
    samples = stack_samples(state)
    return summarise(samples, others=other_torch_mappers(samples))


# --- search latency ---------------------------------------------------------------------------


def queries() -> list[str]:
    """The real-server requests: short, one tool each, phrased as agents ask."""
    data = json.loads((DATA / "real_servers" / "requests.json").read_text())
    return [r["request"] for r in data["requests"]]


def search_ms(client: httpx.Client, gateway_url: str, query: str) -> float:
    started = time.perf_counter()
    response = client.post(f"{gateway_url}/v1/tools/search", json={"query": query, "limit": 5})
    elapsed = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    return elapsed


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 2),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        "max": round(ordered[-1], 2),
    }


def latency(gateway_urls: list[str], texts: list[str]) -> list[dict[str, float]]:
    """Each query once on every gateway, alternating which goes first."""
    times: list[list[float]] = [[] for _ in gateway_urls]
    with httpx.Client(timeout=60) as client:
        for i, text in enumerate(texts):
            order = list(range(len(gateway_urls)))
            if i % 2:
                order.reverse()
            for side in order:
                times[side].append(search_ms(client, gateway_urls[side], text))
    return [percentiles(t) for t in times]


def warm(gateway_url: str, texts: list[str]) -> None:
    """A few searches (the gateway's model loads on the first), then time to settle."""
    with httpx.Client(timeout=120) as client:
        for text in texts:
            search_ms(client, gateway_url, text)
    time.sleep(SETTLE_S)


# --- stacks -------------------------------------------------------------------------------------


def run(
    compare: str | None = None, warm_queries: int = 10, after_pass: bool = False
) -> dict[str, Any]:
    """The idle stack's memory per process and in total, and search latency; with
    ``compare``, the same for that ref first, the latency of both alternating; with
    ``after_pass``, each stack's learning worker measured again after learned runs and a
    consolidation pass (``deploy.bench.footprint_pass``)."""
    texts = queries()
    warm_texts, timed = texts[:warm_queries], texts[warm_queries:]
    out: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="agentcards-footprint-") as tmp:
        servers, missing = five_servers(Path(tmp))
        config = Path(tmp) / "mcp.json"
        config.write_text(json.dumps({"mcpServers": servers}))
        out["servers"], out["missing_servers"] = sorted(servers), missing
        if compare is None:
            with held_stack(ROOT, config, name="new", timeout_s=240) as new:
                warm(new.gateway_url, warm_texts)
                out["memory"] = measure(new.run_dir)
                (out["search_ms"],) = latency([new.gateway_url], timed)
                if after_pass:
                    out["after_pass"] = measure_after_pass(new, idle=out["memory"])
        else:
            with checkout(compare) as old_root:
                out["compare"] = {"old": compare, "new": str(ROOT)}
                with held_stack(old_root, config, name="old", timeout_s=240) as old:
                    warm(old.gateway_url, warm_texts)
                    old_memory = measure(old.run_dir)
                    old_pass = measure_after_pass(old, idle=old_memory) if after_pass else None
                    with held_stack(ROOT, config, name="new", timeout_s=240) as new:
                        warm(new.gateway_url, warm_texts)
                        old_ms, new_ms = latency([old.gateway_url, new.gateway_url], timed)
                        old.stop()
                        time.sleep(SETTLE_S)
                        new_memory = measure(new.run_dir)
                        if after_pass:
                            new_pass = measure_after_pass(new, idle=new_memory)
                out["old"] = {"memory": old_memory, "search_ms": old_ms}
                out["new"] = {"memory": new_memory, "search_ms": new_ms}
                out["new_vs_old"] = {
                    "total_pss_mib": [old_memory["total_pss_mib"], new_memory["total_pss_mib"]],
                    "search_p50_ms": [old_ms["p50"], new_ms["p50"]],
                    "search_p90_ms": [old_ms["p90"], new_ms["p90"]],
                }
                if after_pass:
                    out["old"]["after_pass"], out["new"]["after_pass"] = old_pass, new_pass
    out["load_avg_end"] = os.getloadavg()
    return out


def measure_after_pass(stack: HeldStack, *, idle: dict[str, Any]) -> dict[str, Any]:
    """The learning worker's memory after a consolidation pass, beside its idle figures."""
    state = StackState.load(stack.run_dir)
    if state is None or "learning-worker" not in state.processes:
        raise RuntimeError(f"no learning worker in {stack.run_dir}")
    done = after_a_pass(stack, state.processes["learning-worker"])
    time.sleep(SETTLE_S)
    after = measure(stack.run_dir)
    learning = [p for p in after["processes"] if p["role"] == "learning-worker"]
    return {
        **done,
        "learning_worker": {
            "idle": idle["by_role"].get("learning-worker"),
            "after_pass": after["by_role"].get("learning-worker"),
            "maps_torch_idle": any(
                p["maps_torch"] for p in idle["processes"] if p["role"] == "learning-worker"
            ),
            "maps_torch_after_pass": any(p["maps_torch"] for p in learning),
        },
        "total_pss_mib": [idle["total_pss_mib"], after["total_pss_mib"]],
    }
