"""The tool-search sets `bench search` reports: LiveMCPBench and two real-server request sets.

Each set is a catalogue, its queries with gold tools, and a hash-seeded split into a
tuning part (weights are fitted on it) and a held-out part (looked at after fitting).
The third set, more_servers, is held out whole: its splits are reported, never fitted on.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from deploy.bench.search import Tool, data_dir, load_catalogue, load_tasks

DATA = Path(__file__).resolve().parent / "data"
HOLDOUT_SHARE = 3  # one query in three is held out


@dataclass(frozen=True)
class Query:
    """One request, its gold tools (as ``key`` sees them) and its split."""

    text: str
    gold: frozenset[str]
    split: str  # tune | holdout


@dataclass(frozen=True)
class SearchSet:
    """A catalogue and its queries. ``by`` says how a hit is compared with gold: by tool
    ``name`` (LiveMCPBench: a few names exist on several servers, any counts) or ``id``;
    ``scoring`` is ``recall`` (every gold tool is needed) or ``any`` (gold are alternatives).
    ``tuned`` is False for a set kept out of weight fitting, so it stays an honest check."""

    name: str
    tools: list[Tool]
    queries: list[Query]
    by: str
    scoring: str
    tuned: bool = True


def hash_split(text: str) -> str:
    """'holdout' for a stable third of texts, else 'tune'."""
    return (
        "holdout"
        if int(hashlib.sha256(text.encode()).hexdigest(), 16) % HOLDOUT_SHARE == 0
        else "tune"
    )


def livemcpbench() -> SearchSet:
    """LiveMCPBench's 527 tools and its task questions (long, multi-step)."""
    tools = load_catalogue(data_dir())
    tasks = load_tasks(data_dir(), names={t.name for t in tools})
    return SearchSet(
        name="livemcpbench",
        tools=tools,
        queries=[Query(t.question, t.gold, hash_split(t.question)) for t in tasks],
        by="name",
        scoring="recall",
    )


def server_requests(folder: Path, *, tuned: bool = True) -> SearchSet:
    """A folder's snapshot of real servers' tools (tools.json) and short one-tool requests
    (requests.json), named after the folder; gold are alternatives, compared by tool id."""
    listed = json.loads((folder / "tools.json").read_text())["tools"]
    tools = [
        Tool(
            server=server,
            name=t["name"],
            description=t["description"],
            input_schema=t["inputSchema"] or {},
        )
        for server, entries in listed.items()
        for t in entries
    ]
    requests = json.loads((folder / "requests.json").read_text())["requests"]
    return SearchSet(
        name=folder.name,
        tools=tools,
        queries=[Query(r["request"], frozenset(r["gold"]), r["split"]) for r in requests],
        by="id",
        scoring="any",
        tuned=tuned,
    )


def real_servers() -> SearchSet:
    """The 50 tools of five published MCP servers and 80 short one-tool requests."""
    return server_requests(DATA / "real_servers")


def more_servers() -> SearchSet:
    """The held-out check: 66 tools of eight other published MCP servers and 91 requests
    written without sight of the ranking method or any result, so nothing was tuned to it."""
    return server_requests(DATA / "more_servers", tuned=False)


def all_sets() -> list[SearchSet]:
    return [livemcpbench(), real_servers(), more_servers()]
