"""On a real stack after a full drive: every declared metric counted, JSON logs with the ids of
the work they concern, Flower listing our task names, the dashboard's summary."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from shared import metrics
from shared.queues import TaskName
from tests.integration.observability.conftest import TENANT, Scenario, _wait

# Gauges computed at scrape time from the counters (not declared in the dicts).
DERIVED = {
    "agentcards_cache_hit_rate",
    "agentcards_capabilities_match_rate",
    "agentcards_capabilities_success_rate",
    "agentcards_promotion_rate",
    "agentcards_queue_depth",
}


def declared_families() -> set[str]:
    """Every family /metrics must carry, from the declarations themselves."""
    names = {*metrics.COUNTERS, *metrics.LABELLED_COUNTERS}
    families = {f"agentcards_{n.removesuffix('_total')}" for n in names}
    families |= {f"agentcards_{n}" for n in (*metrics.GAUGES, *metrics.HISTOGRAMS)}
    families |= {f"agentcards_{n}" for n in metrics.LABELLED_HISTOGRAMS}
    return families | DERIVED


def peak_values(scrapes: list[str]) -> dict[str, float]:
    """Per family, the highest sample seen in any scrape (histograms: their count)."""
    peaks: dict[str, float] = {}
    for text in scrapes:
        for family in text_string_to_metric_families(text):
            wanted = (
                {f"{family.name}_count"}
                if family.type == "histogram"
                else {
                    family.name,
                    f"{family.name}_total",
                }
            )
            values = [s.value for s in family.samples if s.name in wanted]
            peaks[family.name] = max([peaks.get(family.name, 0.0), *values])
    return peaks


# Counted only on a stack with a policy file, which this scenario cannot have (a policy file
# turns result-cache reads off, and the scenario counts cache hits): the policy stack's own
# tests check they move (tests/integration/policy/test_decisions.py, test_approvals.py).
COUNTED_ELSEWHERE = {"agentcards_policy_decisions", "agentcards_approvals"}


def test_every_declared_metric_was_counted(scenario: Scenario) -> None:
    scenario.scrape()
    peaks = peak_values(scenario.scrapes)
    missing = declared_families() - set(peaks)
    assert not missing, f"declared but not exported: {sorted(missing)}"
    zero = sorted(name for name in declared_families() - COUNTED_ELSEWHERE if peaks[name] <= 0)
    assert not zero, f"declared metrics that stayed zero through the run: {zero}"
    final = {f.name: f for f in text_string_to_metric_families(scenario.scrapes[-1])}
    statuses = {s.labels["status"] for s in final["agentcards_executions_finished"].samples}
    assert {"succeeded", "timeout", "cancelled"} <= statuses
    kills = {s.labels["kind"]: s.value for s in final["agentcards_sandbox_limit_kills"].samples}
    assert kills.get("wall", 0) >= 1
    servers = {
        s.labels["server"]
        for s in final["agentcards_tool_call_latency_seconds"].samples
        if s.name.endswith("_count")
    }
    assert servers == {"example", "time"}
    print("\n".join(line for line in scenario.scrapes[-1].splitlines() if "#" not in line))


def _json_lines(scenario: Scenario, name: str) -> list[dict[str, Any]]:
    """Every line of one process's log, each of which must be a JSON object."""
    lines = []
    for raw in (scenario.logs / f"{name}.log").read_text().splitlines():
        if raw.strip():
            try:
                lines.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                raise AssertionError(
                    f"{name}.log has a line that is not JSON: {raw[:300]}"
                ) from None
    return lines


def test_json_logs_name_the_execution_tool_call_and_tenant(scenario: Scenario) -> None:
    execution_id = scenario.learned_id
    for name in ("sandbox-worker", "toolhost", "gateway", "learning-worker"):
        lines = _json_lines(scenario, name)
        assert lines and all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
        about = [
            line
            for line in lines
            if line.get("execution_id") == execution_id or execution_id in line["message"]
        ]
        if name in ("sandbox-worker", "toolhost"):
            assert about, f"{name} logged nothing about execution {execution_id}"
        for line in about:
            assert line.get("execution_id") == execution_id, line
            assert line.get("tenant_id") == TENANT, line
    tool_calls = [
        line
        for line in _json_lines(scenario, "toolhost")
        if line.get("execution_id") == execution_id and "tool call" in line["message"]
    ]
    assert [line["message"].split(":")[0] for line in tool_calls] == [
        "tool call example",
        "tool call example",
    ]
    assert len({line["tool_call_id"] for line in tool_calls}) == 2


def test_flower_lists_our_task_names(scenario: Scenario) -> None:
    ran = {TaskName.RUN_EXECUTION, TaskName.INGEST_EXECUTION, TaskName.REFRESH_GRAPH_METRICS}

    def seen() -> bool:
        return ran <= set(scenario.flower("/api/task/types")["task-types"])

    _wait(seen, timeout_s=60)
    # A run's task with its whole life: the worker's events reach Flower in batches
    # (shared/celery_events.py), each of them.
    runs = scenario.flower(f"/api/tasks?taskname={TaskName.RUN_EXECUTION}&state=SUCCESS")
    mine = [t for t in runs.values() if scenario.learned_id in (t.get("args") or "")]
    assert len(mine) == 1, runs
    assert mine[0]["received"] and mine[0]["started"] and mine[0]["succeeded"], mine[0]
    assert mine[0]["worker"].startswith("sandbox@"), mine[0]
    workers = scenario.flower("/api/workers?refresh=1")
    registered = {task for info in workers.values() for task in info.get("registered", [])}
    assert {str(t) for t in TaskName} <= registered


def test_metrics_summary_for_the_dashboard(scenario: Scenario) -> None:
    with scenario.client() as client:
        summary = client.get("/api/metrics/summary").json()
        spec = client.get("/openapi.json").json()
    with scenario.db() as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM capabilities WHERE tenant_id = %s", (TENANT,)
        ).fetchone()
    assert row is not None
    assert summary["executions_per_min"] > 0
    assert 0 < summary["success_rate"] < 1  # the spinning runs timed out or were cancelled
    assert 0 < summary["cache_hit_rate"] < 1
    assert summary["capabilities_learned"] == row["n"] > 0
    flower = f"http://127.0.0.1:{scenario.handle.settings.flower_port}"
    assert summary["flower_url"] == flower
    from tests.integration.observability.conftest import FLOWER_PASSWORD, FLOWER_USER

    page = httpx.get(summary["flower_url"], auth=(FLOWER_USER, FLOWER_PASSWORD), timeout=30)
    assert page.status_code == 200 and "Flower" in page.text
    assert "/api/metrics/summary" in spec["paths"]
    # Another tenant sees its own (empty) activity.
    with scenario.client(scenario.other_key) as client:
        other = client.get("/api/metrics/summary").json()
    assert other["capabilities_learned"] == 0 and other["executions_per_min"] == 0
    assert other["success_rate"] is None and other["cache_hit_rate"] is None
