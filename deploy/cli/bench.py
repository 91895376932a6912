"""`agentcards bench …`: each benchmark prints one JSON document on stdout."""

from __future__ import annotations

import importlib
import json
import logging
import os
from typing import Any

import typer
from pydantic import ValidationError

from shared.config import Settings
from shared.errors import AgentCardsError

bench_app = typer.Typer(help="Benchmarks; each prints one JSON document.", no_args_is_help=True)


def _emit(result: dict[str, Any]) -> None:
    typer.echo(json.dumps(result, indent=2, default=str))


def _run(module: str, **kwargs: Any) -> None:
    logging.basicConfig(level=logging.WARNING)
    bench = importlib.import_module(f"deploy.bench.{module}")
    _emit(bench.run(**{k: v for k, v in kwargs.items() if v is not None}))


@bench_app.command("sandbox")
def sandbox(n: int = typer.Option(200, help="sandbox starts to time")) -> None:
    """Sandbox start-to-first-instruction and bridge overhead, beside bare `python3 -I -S`."""
    _run("sandbox", n=n)


@bench_app.command("rpc")
def rpc(n: int = typer.Option(2000, help="tool calls to time")) -> None:
    """Tool-call overhead through the Redis RPC channel, beside a raw LPUSH/BLPOP."""
    _run("rpc", n=n)


@bench_app.command("e2e")
def e2e(
    n: int = typer.Option(200, help="executions of each kind per configuration"),
    compare: str | None = typer.Option(
        None, help="a git ref (or a checkout's directory) to run alternately with this one"
    ),
) -> None:
    """POST /v1/executions?wait=true latency and throughput, beside a no-op Celery task;
    with --compare REF, this checkout against REF in one run (old/new medians, ratio)."""
    _run("e2e", n=n, compare=compare)


@bench_app.command("input-required")
def input_required(n: int = typer.Option(100, help="eliciting runs of each kind")) -> None:
    """An eliciting tool's run over MCP: 2026-07-28 (InputRequiredResult and retry) beside
    2025-11-25's relay, and a 2026-07-28 direct call."""
    _run("input_required", n=n)


@bench_app.command("direct")
def direct(
    n: int = typer.Option(300, help="sequential calls per path"),
    seconds: float = typer.Option(5.0, help="how long the concurrent sessions call"),
) -> None:
    """A direct tools/call through /mcp/servers/<name> (and /mcp/servers, /mcp in direct mode)
    beside the server over stdio alone and the FastMCP proxy (pinned, installed by the bench):
    sequential latency, 8 sessions' throughput, other sessions during a 5-second call."""
    _run("direct", n=n, seconds=seconds)


@bench_app.command("tracing")
def tracing(n: int = typer.Option(200, help="executions per side")) -> None:
    """`bench e2e`'s execution with tracing off and on (OTLP to a local receiver), alternating."""
    _run("tracing", n=n)


@bench_app.command("pii")
def pii(
    n: int = typer.Option(20, help="runs of each case"),
    e2e: int = typer.Option(0, help="also: one-tool executions on stacks with PII off and on"),
) -> None:
    """Tokenising a 1 MB tool result and a 100-record JSON result, beside the untokenised path."""
    _run("pii", n=n, e2e=e2e)


@bench_app.command("auth")
def auth(n: int = typer.Option(2000, help="requests of each kind")) -> None:
    """The auth gate per request: no check beside a person's JWT (checked in full, and from
    the token cache) and a DPoP-bound token with its proof."""
    _run("auth", n=n)


@bench_app.command("learning")
def learning() -> None:
    """Trace ingestion throughput and graph refresh time."""
    _run("learning")


@bench_app.command("search")
def search(
    gate: str | None = typer.Option(
        None,
        help="a git ref (or a checkout's directory): compare this checkout's search with it "
        "on every set, request by request; exit 1 when any set drops by more than its noise",
    ),
    sets: str | None = typer.Option(None, help="with --gate: only these sets (comma-separated)"),
    learned_sets: str | None = typer.Option(
        None, help="with --gate: the learned protocol on these sets only (default: all)"
    ),
    distractor_sets: str | None = typer.Option(
        None, help="with --gate: the distractors on these sets only (default: all)"
    ),
    fractions: str = typer.Option(
        "0.1,0.25,0.5", help="with --gate: the learned protocol's points (shares of a set)"
    ),
    embedding_model: str | None = typer.Option(
        None,
        "--embedding-model",
        help="the encoder to measure (AGENTCARDS_EMBEDDING_MODEL; default: as configured)",
    ),
    backend: str | None = typer.Option(
        None,
        "--backend",
        help="what runs it: torch, onnx or onnx-int8 (AGENTCARDS_EMBEDDING_BACKEND)",
    ),
) -> None:
    """The shipped tool ranking beside dense retrieval, zero-shot and learning; latency at 10k
    tools. With --gate REF, the gate instead (deploy/bench/search_gate.py)."""
    _use_encoder(model=embedding_model, backend=backend)
    if gate is None:
        _run("search")
        return
    logging.basicConfig(level=logging.WARNING)
    from deploy.bench import search_gate

    def names(value: str | None) -> list[str] | None:
        return value.split(",") if value else None

    result = search_gate.run(
        gate,
        names=names(sets),
        learned=names(learned_sets),
        distracted=names(distractor_sets),
        fractions=[float(f) for f in fractions.split(",")],
    )
    _emit(result)
    if not result["passed"]:
        raise typer.Exit(1)


def _use_encoder(*, model: str | None, backend: str | None) -> None:
    """Measure with this encoder: set for this process and the ones it starts (the gate's
    sides, their databases), checked as a service's settings are."""
    given = {"AGENTCARDS_EMBEDDING_MODEL": model, "AGENTCARDS_EMBEDDING_BACKEND": backend}
    chosen = {k: v for k, v in given.items() if v is not None}
    if not chosen:
        return
    os.environ.update(chosen)
    try:
        Settings()
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(e["msg"] for e in exc.errors())) from None
    except AgentCardsError as exc:
        raise typer.BadParameter(str(exc)) from None


@bench_app.command("match")
def match() -> None:
    """Capability matching accuracy on paraphrases and false matches on unrelated intents."""
    _run("match")


@bench_app.command("cache")
def cache(n: int = typer.Option(200, help="requests per measured configuration")) -> None:
    """One capability: miss, L1 hit and L2 hit latency end to end, beside a no-op Celery task."""
    _run("cache", n=n)


@bench_app.command("load")
def load(
    seconds: int = typer.Option(60, help="length of the run at the best rate"),
    io_seconds: int = typer.Option(15, help="length of each 1 / 2 / 2+2 worker measurement"),
    probe_seconds: int = typer.Option(8, help="length of each rate probe"),
    sequential: int = typer.Option(200, help="one-at-a-time runs for the latency tail"),
) -> None:
    """One client's p50/p99 and phases, the highest held rate, 1 vs 2 vs 2+2 sandbox workers."""
    _run(
        "load",
        seconds=seconds,
        io_seconds=io_seconds,
        probe_seconds=probe_seconds,
        sequential=sequential,
    )


@bench_app.command("dashboard")
def dashboard(
    capabilities: int = typer.Option(50, help="capabilities in the synthetic graph"),
    tools: int = typer.Option(200, help="tools in the synthetic graph"),
    screenshots: str | None = typer.Option(None, help="folder for a PNG of each view"),
) -> None:
    """Dashboard graph render time in headless Chromium (Cytoscape + fcose), per view."""
    _run("dashboard", capabilities=capabilities, tools=tools, screenshots=screenshots)


@bench_app.command("policy")
def policy(
    n: int = typer.Option(2000, help="decisions of each kind per policy count"),
    calls: int = typer.Option(1000, help="tool calls per side (no policy, 100, 1,000 policies)"),
) -> None:
    """Policy decisions: p50/p99 per decision (allowed, forbidden, nothing permits) at 100 and
    1,000 policies, and a tool call through the RPC channel with each beside no policy."""
    _run("policy", n=n, calls=calls)


@bench_app.command("footprint")
def footprint(
    compare: str | None = typer.Option(
        None,
        help="a git ref (or a checkout's directory) measured first, its search beside this one's",
    ),
    after_pass: bool = typer.Option(
        False,
        "--after-pass",
        help="then learned runs and a consolidation pass: the learning worker measured again",
    ),
) -> None:
    """PSS per process of an idle stack with five published MCP servers (servers apart),
    and tool-search latency over REST; with --compare REF, REF's figures beside these."""
    _run("footprint", compare=compare, after_pass=after_pass)


@bench_app.command("install")
def install(keep: bool = typer.Option(False, help="keep the venv (its path is printed)")) -> None:
    """`pip install -e .` into a fresh venv (torch first, timed apart): the phases, the
    slowest packages to collect, the largest installed distributions."""
    _run("install", keep=keep)
