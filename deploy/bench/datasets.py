"""The benchmarks' data sets, loaded from ``deploy/bench/data`` (nothing here touches a database).

- LiveMCPBench (``data/livemcpbench``, or $AGENTCARDS_LIVEMCPBENCH_DIR): 527 tools and the
  dev-set questions with the tools their solutions used.
- The tool-search sets `bench search` reports: LiveMCPBench, two snapshots of published MCP
  servers with short requests, and two sets built from the Berkeley Function Calling
  Leaderboard (``research/search/build_bfcl.py``), and two look-only-after sets
  (``research/search/build_heldout.py``: NESTFUL and BFCL's non-live half), built and
  committed before any result on them was seen, and four phrasing sets on the published
  servers' catalogue (``real_servers_<intent>``: store, recall, forget a fact, and other
  payload-heavy requests; issue 49 §4). Each is a catalogue, its queries with gold
  tools, and a hash-seeded split into a tuning part (the fusion weights were fitted on it)
  and a held-out part. A set with ``tuned=False`` was never fitted on: its splits are both
  held out.
- The paraphrase sets `bench match` reports (``data/match_set*.json``).

The bench modules that read data import this one; it imports none of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
DATA_ENV = "AGENTCARDS_LIVEMCPBENCH_DIR"
HOLDOUT_SHARE = 3  # one query in three is held out

MATCH_SET = DATA / "match_set.json"
MATCH_HELDOUT = DATA / "match_set_heldout.json"
MATCH_HELDOUT2 = DATA / "match_set_heldout2.json"


@dataclass(frozen=True)
class Tool:
    """One catalogue tool."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    # The MCP annotations the server declared (``readOnlyHint``, ``destructiveHint``…), as
    # the toolhost stores them; {} where the snapshot has none.
    annotations: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.server}:{self.name}"


@dataclass(frozen=True)
class Task:
    """One dev-set question and the names of the tools its solution used."""

    question: str
    gold: frozenset[str]


def data_dir() -> Path:
    """LiveMCPBench data: $AGENTCARDS_LIVEMCPBENCH_DIR, else the copy shipped beside this file."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return DATA / "livemcpbench"


def load_catalogue(directory: Path) -> list[Tool]:
    """Every tool of tools.json (servers → tools), in file order."""
    tools: list[Tool] = []
    for entry in json.loads((directory / "tools.json").read_text()):
        for server, spec in entry.get("tools", {}).items():
            for tool in spec.get("tools", []):
                tools.append(
                    Tool(
                        server=server,
                        name=tool["name"],
                        description=tool.get("description") or "",
                        input_schema=tool.get("inputSchema") or {},
                        annotations=tool.get("annotations") or {},
                    )
                )
    return tools


def load_tasks(directory: Path, *, names: set[str]) -> list[Task]:
    """Tasks with at least one annotated tool in the catalogue (94 of 95)."""
    tasks = []
    for item in json.loads((directory / "all_annotations.json").read_text()):
        listed = item.get("Annotator Metadata", {}).get("Tools", "")
        used = {re.sub(r"^\s*\d+\.\s*", "", line).strip() for line in listed.splitlines()}
        gold = frozenset(u for u in used if u in names)
        if gold:
            tasks.append(Task(question=item["Question"], gold=gold))
    return tasks


def load_set(path: Path = MATCH_SET) -> dict[str, Any]:
    """A paraphrase set: capabilities (intent, code, paraphrases) and unrelated intents."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


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


def server_requests(
    folder: Path,
    *,
    tuned: bool = True,
    requests: str | Path = "requests.json",
    name: str | None = None,
) -> SearchSet:
    """A folder's snapshot of real servers' tools (tools.json) and short one-tool requests
    (requests.json unless named: a name in the folder or a path elsewhere), named after the
    folder unless named; gold are alternatives, compared by tool id."""
    listed = json.loads((folder / "tools.json").read_text())["tools"]
    tools = [
        Tool(
            server=server,
            name=t["name"],
            description=t["description"],
            input_schema=t["inputSchema"] or {},
            annotations=t.get("annotations") or {},
        )
        for server, entries in listed.items()
        for t in entries
    ]
    listed_requests = json.loads((folder / requests).read_text())["requests"]
    return SearchSet(
        name=name or folder.name,
        tools=tools,
        queries=[Query(r["request"], frozenset(r["gold"]), r["split"]) for r in listed_requests],
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


def bfcl_single() -> SearchSet:
    """Berkeley Function Calling Leaderboard (live_multiple + live_simple): 457 functions of
    user-contributed candidate lists, 931 one-function requests for the 61 functions with
    four or more (``research/search/build_bfcl.py``). Never fitted on."""
    return server_requests(DATA / "bfcl_single", tuned=False)


def bfcl_multi() -> SearchSet:
    """BFCL multi_turn_base: 162 functions of 12 API classes, 731 user turns, each needing
    every function its ground truth calls (254 need several). Never fitted on."""
    return replace(server_requests(DATA / "bfcl_multi", tuned=False), scoring="recall")


def nestful() -> SearchSet:
    """NESTFUL (IBM, PyPI ``nestful-wrapper``): 133 APIs (RapidAPI, SGD, Glaive specs) and
    300 requests, each needing every API of its call sequence. Look-only-after."""
    return replace(server_requests(DATA / "nestful", tuned=False), scoring="recall")


def bfcl_ast() -> SearchSet:
    """BFCL's non-live half (simple_python, multiple, parallel, parallel_multiple): 769
    functions offered in its candidate lists, 900 requests, each needing every function its
    ground truth calls. Look-only-after."""
    return replace(server_requests(DATA / "bfcl_ast", tuned=False), scoring="recall")


# Issue 49 §4: how people ask to store, look up and forget facts, and payload-heavy requests
# for the other servers (names, quoted text), on real_servers' catalogue (server-everything
# included). Written and committed before any search result on them was seen; never fitted on.
PHRASINGS = ("store", "recall", "forget", "other")


def real_servers_phrasings(intent: str) -> SearchSet:
    """``real_servers_<intent>``: 30-36 requests of one intent of ``PHRASINGS``, whose payload
    (people, facts, quoted text) outweighs the action in the request's words."""
    return server_requests(
        DATA / "real_servers",
        requests=f"requests_{intent}.json",
        name=f"real_servers_{intent}",
        tuned=False,
    )


# Built and committed before any search result on them was seen: no ranking or learning
# setting is chosen on them; `bench search --gate` only checks that a change keeps them.
LOOK_ONLY_AFTER = ("nestful", "bfcl_ast")


def all_sets() -> list[SearchSet]:
    """The tool-search sets `bench search` reports, in report order."""
    return [
        livemcpbench(),
        real_servers(),
        more_servers(),
        bfcl_single(),
        bfcl_multi(),
        nestful(),
        bfcl_ast(),
        *(real_servers_phrasings(intent) for intent in PHRASINGS),
    ]
