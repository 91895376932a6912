"""Build `bench search`'s two public learned-protocol sets from the Berkeley Function Calling
Leaderboard's data (PyPI ``bfcl-eval``, Apache-2.0), offline, from the wheel:

    pip download bfcl-eval==2026.3.23 --no-deps -d /tmp/bfcl
    python -m research.search.build_bfcl /tmp/bfcl/bfcl_eval-2026.3.23-py3-none-any.whl

It writes ``deploy/bench/data/bfcl_single`` and ``deploy/bench/data/bfcl_multi`` (tools.json,
requests.json, NOTICE), in the shape of ``data/real_servers`` (``datasets.server_requests``).

- **bfcl_single** (one tool per request): BFCL_v4_live_multiple, plus BFCL_v4_live_simple's
  entries whose ground-truth function is in that catalogue. A tool is a function *name*:
  live entries were contributed by users, and one function appears under several
  paraphrased descriptions (``uber.ride`` under 8), so keying by name + description would
  make a test of telling paraphrases apart. A tool's description and parameters are its most
  frequent variant's (ties: the first seen). The catalogue is every function named in any
  live_multiple candidate list; requests are kept for tools with 4 requests or more.
  Server = the name's first dotted segment, else ``live``; the tool keeps its full name.
- **bfcl_multi** (several tools per request): every user turn of BFCL_v4_multi_turn_base is a
  request, gold = the functions its ground-truth calls name (resolved against the entry's
  involved classes; turns without calls are dropped). The catalogue is every function of
  every ``multi_turn_func_doc`` class, server = the class's doc file (``gorilla_file_system``).

``split`` is ``datasets.hash_split`` as in the other sets; the learned protocol splits by tool.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

from deploy.bench.datasets import DATA, hash_split

PACKAGE = "bfcl-eval"
MIN_REQUESTS = 4  # per bfcl_single tool: two learning and two test requests or more
PREFIX = "bfcl_eval/data/"
# bfcl_eval/constants/executable_backend_config.py: class → its function doc file.
CLASS_DOCS = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
    "WebSearchAPI": "web_search",
    "MemoryAPI_kv": "memory_kv",
    "MemoryAPI_vector": "memory_vector",
    "MemoryAPI_rec_sum": "memory_rec_sum",
}


class Wheel:
    """The JSON-lines files of a bfcl-eval wheel's data folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.version = path.name.split("-")[1]

    def lines(self, name: str) -> list[dict[str, Any]]:
        text = self.zip.read(PREFIX + name).decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def answers(self, name: str) -> dict[str, Any]:
        return {a["id"]: a["ground_truth"] for a in self.lines(f"possible_answer/{name}")}


def _user_text(entry: dict[str, Any]) -> str:
    """The last user message of a single-turn entry."""
    users = [m["content"] for m in entry["question"][0] if m["role"] == "user"]
    return " ".join(users[-1].split())


def _schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """BFCL's parameters as a JSON schema (BFCL writes ``dict`` for ``object``)."""
    return {**parameters, "type": "object"} if parameters.get("type") == "dict" else parameters


def _server(name: str) -> str:
    return name.split(".")[0].lower() if "." in name else "live"


def build_single(wheel: Wheel) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tools.json, requests.json) of bfcl_single."""
    variants: dict[str, Counter[str]] = {}
    first: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in wheel.lines("BFCL_v4_live_multiple.json"):
        for f in entry["function"]:
            key = (f["name"], json.dumps([f["description"], f["parameters"]], sort_keys=True))
            variants.setdefault(f["name"], Counter())[key[1]] += 1
            first.setdefault(key, f)
    catalogue = {
        name: first[(name, counts.most_common(1)[0][0])] for name, counts in variants.items()
    }
    pairs: list[tuple[str, str]] = []
    for source in ("BFCL_v4_live_multiple.json", "BFCL_v4_live_simple.json"):
        answers = wheel.answers(source)
        for entry in wheel.lines(source):
            called = {name for call in answers[entry["id"]] for name in call}
            if len(called) == 1 and (name := called.pop()) in catalogue:
                pairs.append((_user_text(entry), name))
    pairs = list(dict.fromkeys(pairs))  # the same request for the same tool once
    counts = Counter(name for _, name in pairs)
    kept = [(text, name) for text, name in pairs if counts[name] >= MIN_REQUESTS]
    servers: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(catalogue):
        f = catalogue[name]
        servers.setdefault(_server(name), []).append(
            {
                "name": name,
                "description": f["description"],
                "inputSchema": _schema(f["parameters"]),
            }
        )
    tools = {
        "description": f"Every function named in a candidate list of BFCL_v4_live_multiple "
        f"({PACKAGE}=={wheel.version}), one per name (its most frequent description).",
        "tools": servers,
    }
    requests = {
        "description": f"BFCL_v4_live_multiple + live_simple ({PACKAGE}=={wheel.version}): "
        f"the user's message, gold = the one ground-truth function; tools with "
        f">= {MIN_REQUESTS} requests ({len(set(n for _, n in kept))} tools). "
        "Built by research/search/build_bfcl.py; no request was edited.",
        "requests": [
            {"request": text, "gold": [f"{_server(name)}:{name}"], "split": hash_split(text)}
            for text, name in kept
        ],
    }
    return tools, requests


def _called(calls: list[str]) -> list[str]:
    """Function names of a turn's ground-truth calls ("cd(folder='x')" → "cd")."""
    names = []
    for call in calls:
        node = ast.parse(call, mode="eval").body
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), call
        names.append(node.func.id)
    return names


def build_multi(wheel: Wheel) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tools.json, requests.json) of bfcl_multi."""
    docs = {stem: wheel.lines(f"multi_turn_func_doc/{stem}.json") for stem in CLASS_DOCS.values()}
    answers = wheel.answers("BFCL_v4_multi_turn_base.json")
    requests = []
    for entry in wheel.lines("BFCL_v4_multi_turn_base.json"):
        owner = {
            f["name"]: CLASS_DOCS[c] for c in entry["involved_classes"] for f in docs[CLASS_DOCS[c]]
        }
        for turn, calls in zip(entry["question"], answers[entry["id"]], strict=True):
            gold = sorted({f"{owner[n]}:{n}" for n in _called(calls)})
            text = " ".join(" ".join(m["content"] for m in turn if m["role"] == "user").split())
            if gold and text:
                requests.append({"request": text, "gold": gold, "split": hash_split(text)})
    tools = {
        "description": f"Every function of every multi_turn_func_doc class ({PACKAGE}=="
        f"{wheel.version}), server = the class's doc file.",
        "tools": {
            stem: [
                {
                    "name": f["name"],
                    "description": f["description"],
                    "inputSchema": _schema(f["parameters"]),
                }
                for f in functions
            ]
            for stem, functions in docs.items()
        },
    }
    described = {
        "description": f"BFCL_v4_multi_turn_base ({PACKAGE}=={wheel.version}): each user turn, "
        "gold = every function its ground-truth calls name (all needed). Built by "
        "research/search/build_bfcl.py; no request was edited.",
        "requests": requests,
    }
    return tools, described


NOTICE = """{name}: derived from the Berkeley Function Calling Leaderboard's data, as shipped
in the PyPI package {package}=={version} (bfcl_eval/data/), Copyright the Gorilla / BFCL
authors (UC Berkeley), licensed under the Apache License, Version 2.0
(https://www.apache.org/licenses/LICENSE-2.0). Changes: requests, ground-truth function names
and function docs were selected and re-shaped into this repository's set format by
research/search/build_bfcl.py (see its docstring); no text was edited.
"""


def write(wheel_path: Path, out: Path = DATA) -> dict[str, int]:
    """Write both sets under ``out``; returns their sizes."""
    wheel = Wheel(wheel_path)
    sizes = {}
    for name, (tools, requests) in (
        ("bfcl_single", build_single(wheel)),
        ("bfcl_multi", build_multi(wheel)),
    ):
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tools.json").write_text(json.dumps(tools, indent=1) + "\n")
        (folder / "requests.json").write_text(json.dumps(requests, indent=1) + "\n")
        (folder / "NOTICE").write_text(
            NOTICE.format(name=name, package=PACKAGE, version=wheel.version)
        )
        sizes[f"{name}_tools"] = sum(len(v) for v in tools["tools"].values())
        sizes[f"{name}_requests"] = len(requests["requests"])
        sizes[f"{name}_gold_tools"] = len({g for r in requests["requests"] for g in r["gold"]})
    return sizes


if __name__ == "__main__":
    print(json.dumps(write(Path(sys.argv[1])), indent=2))
