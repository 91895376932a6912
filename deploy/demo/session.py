"""The scripted agent session `agentcards demo` plays against a running gateway."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from shared.broker import make_celery
from shared.config import Settings
from shared.queues import Queue, TaskName

WORD_COUNT = """\
files = await mcp.example.list_files()
if args["name"] not in files:
    raise ValueError(f"no such file: {args['name']} (have {files})")
text = await mcp.example.read_file(name=args["name"])
words = text.split()
return {"file": args["name"], "words": len(words), "first": words[:3]}
"""
FLAKY = """\
files = await mcp.example.list_files()
try:
    await mcp.example.fail(message="the archive service is down")
except Exception as exc:
    print("tool failed:", exc)
return {"files": len(files)}
"""


class StepFailed(Exception):
    """Raised when a step's outcome is not what the demo shows: the step is reported failed."""


@dataclass
class Step:
    """One line of the live display and of the summary table."""

    title: str
    status: str = "pending"
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Session:
    """Plays the steps in order, reporting each through `on_change`."""

    gateway_url: str
    settings: Settings
    on_change: Callable[[list[Step]], None]
    steps: list[Step] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def run(self) -> dict[str, Any]:
        plan: list[tuple[str, Callable[[httpx.Client], str]]] = [
            ("search tools for the task", self.search_tools),
            ("first run becomes a capability", self.first_run),
            ("a paraphrased intent matches it", self.paraphrase),
            ("re-run the capability with other args", self.rerun),
            ("a failing tool: run reported, not saved", self.failing_tool),
            ("refresh PageRank + Louvain", self.refresh_graph),
            ("suggestions from the learned graph", self.suggestions),
        ]
        self.steps = [Step(title) for title, _ in plan]
        headers = self.settings.bearer_headers()  # a stack with keys: AGENTCARDS_API_KEY's tenant
        with httpx.Client(base_url=self.gateway_url, headers=headers, timeout=60) as client:
            for step, (_, action) in zip(self.steps, plan, strict=True):
                step.status = "running"
                self.on_change(self.steps)
                started = time.perf_counter()
                try:
                    step.detail = action(client)
                    step.status = "ok"
                except StepFailed as exc:  # show the failure and go on: it is a demo
                    step.status = "failed"
                    step.detail = str(exc)
                except Exception as exc:  # a bug or a dropped connection: the same, named
                    step.status = "failed"
                    step.detail = f"{type(exc).__name__}: {exc}"
                step.seconds = time.perf_counter() - started
                self.on_change(self.steps)
        return self.facts

    def search_tools(self, client: httpx.Client) -> str:
        hits = _ok(client.post("/v1/tools/search", json={"query": "read a text file", "limit": 3}))
        if not hits["hits"]:
            raise StepFailed("the search found no tool for 'read a text file'")
        top = hits["hits"][0]
        return f"top hit {top['id']} (score {top['score']:.3f}: {top['why']})"

    def first_run(self, client: httpx.Client) -> str:
        body = {
            "code": WORD_COUNT,
            "intent": "count the words in a sample text file",
            "args": {"name": "welcome.txt"},
        }
        run = _succeeded(client.post("/v1/executions", params={"wait": "true"}, json=body))
        cap = run.get("capability") or {}
        if not cap.get("id"):
            raise StepFailed(
                f"the run succeeded but no capability was saved (execution {run['id']})"
            )
        self.facts["capability"] = cap
        schema = ", ".join(
            f"{k}: {v.get('type', 'any')}"
            for k, v in (cap.get("parameters_schema") or {}).get("properties", {}).items()
        )
        return (
            f"{run['status']}: {run['result']['words']} words; capability "
            f"{cap.get('name')!r} ({cap.get('status')}), parameters {{{schema}}}"
        )

    def paraphrase(self, client: httpx.Client) -> str:
        cap = self._capability()
        paraphrase = "tell me the number of words in a text file"
        found = _ok(client.post("/v1/capabilities/search", json={"intent": paraphrase}))
        unrelated = _ok(
            client.post("/v1/capabilities/search", json={"intent": "book a table for two tonight"})
        )
        self.facts["match"] = found
        best = next((c for c in found["capabilities"] if c["id"] == cap["id"]), None)
        if best is None:
            raise StepFailed(
                f"{paraphrase!r} did not match {cap['name']!r} "
                f"(threshold {found['threshold_used']:.2f})"
            )
        if best.get("degraded"):
            raise StepFailed(f"{cap['name']!r} matched but is degraded: {best['missing_tools']}")
        return (
            f"{paraphrase!r} matched {best['name']!r}: score {best['score']:.3f} (semantic "
            f"{best['semantic_score']:.3f} x reliability 1.2) >= threshold "
            f"{found['threshold_used']:.2f}; unrelated intent: {unrelated['total_found']} matches"
        )

    def rerun(self, client: httpx.Client) -> str:
        cap = self._capability()
        run = _succeeded(
            client.post(
                f"/v1/capabilities/{cap['id']}/execute",
                params={"wait": "true"},
                json={"args": {"name": "recipes.md"}},
            )
        )
        bad = client.post(f"/v1/capabilities/{cap['id']}/execute", json={"args": {"nam": "x"}})
        if bad.status_code != 422:
            raise StepFailed(f"bad args gave HTTP {bad.status_code}, not 422: {bad.text[:200]}")
        return (
            f"{run['status']}: {run['result']['words']} words in recipes.md; bad args -> "
            f"{bad.status_code} {bad.json()['error']['message'][:60]}"
        )

    def failing_tool(self, client: httpx.Client) -> str:
        body = {"code": FLAKY, "intent": "list the files then archive them"}
        run = _succeeded(client.post("/v1/executions", params={"wait": "true"}, json=body))
        failed_tools = [f["tool"] for f in run["tool_failures"]]
        if failed_tools != ["example:fail"]:
            raise StepFailed(f"expected example:fail to fail, tool_failures were {failed_tools}")
        if run.get("capability"):
            raise StepFailed("a run with a failed tool call was saved as a capability")
        failures = ", ".join(f"{f['tool']} ({f['error']})" for f in run["tool_failures"])
        return f"{run['status']}, tool_failures: {failures}; capability not saved"

    def suggestions(self, client: httpx.Client) -> str:
        run = _succeeded(
            client.post(
                "/v1/executions",
                params={"wait": "true"},
                json={
                    "code": "return await mcp.example.list_files()",
                    "intent": "list the sample files",
                },
            )
        )
        items = run.get("suggestions") or []
        if not items:
            return "none yet (the graph is still small)"
        return "; ".join(
            f"{s['type']} {s.get('name') or s['id']} ({s['score']:.2f})" for s in items[:3]
        )

    def _capability(self) -> dict[str, Any]:
        cap: dict[str, Any] = self.facts.get("capability") or {}
        if not cap.get("id"):
            raise StepFailed(
                "needs the capability of 'first run becomes a capability', which failed"
            )
        return cap

    def refresh_graph(self, client: httpx.Client) -> str:
        app = make_celery("agentcards-demo", settings=self.settings)
        try:
            result = app.send_task(
                TaskName.REFRESH_GRAPH_METRICS,
                kwargs={"force": True},
                queue=Queue.MAINTENANCE,
                ignore_result=False,
            ).get(timeout=60)
        finally:
            app.close()
        self.facts["graph"] = result
        return (
            f"{result['nodes']} nodes, {result['edges']} edges, "
            f"{result['communities']} communities in {result['seconds']}s"
        )


def _ok(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise StepFailed(f"HTTP {response.status_code}: {response.text[:300]}")
    data: dict[str, Any] = response.json()
    return data


def _succeeded(response: httpx.Response) -> dict[str, Any]:
    """The finished execution, or StepFailed saying how it ended and why."""
    run = _ok(response)
    if run.get("status") != "succeeded":
        error = run.get("error") or {}
        reason = f"{error.get('type', 'error')}: {error.get('message', '')}".strip(": ")
        raise StepFailed(f"execution {run.get('id')} {run.get('status')}: {reason}")
    return run
