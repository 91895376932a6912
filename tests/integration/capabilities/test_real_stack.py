"""On a real stack: `GET /v1/events` carries a real execution's end and the capability it taught;
`agentcards capabilities` lists, shows, exports and imports over the gateway."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from deploy.cli.capabilities import capabilities_app
from shared.capabilities.outcome import CREATED_STATUSES
from tests.integration.mcp_servers import example_server
from tests.stack import E2EStack, stack_fixture

stack = stack_fixture(lambda tmp: {"example": example_server(tmp)})

Event = tuple[str, dict[str, Any]]


class EventStream:
    """`GET /v1/events` read on a thread; its (type, data) frames in a queue."""

    def __init__(self, url: str) -> None:
        self.events: queue.Queue[Event] = queue.Queue()
        self.comments = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()

    def _read(self, url: str) -> None:
        with (
            httpx.Client(timeout=httpx.Timeout(10, read=None)) as client,
            client.stream("GET", url) as response,
        ):
            assert response.status_code == 200
            kind, data = "", ""
            for line in response.iter_lines():
                if self._stop.is_set():
                    return
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line.startswith(":"):
                    self.comments += 1
                elif not line and kind:
                    self.events.put((kind, json.loads(data)))
                    kind, data = "", ""

    def next(self, *, timeout_s: float) -> Event | None:
        try:
            return self.events.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._stop.set()


@pytest.fixture
def events(stack: E2EStack) -> Iterator[EventStream]:
    stream = EventStream(f"{stack.gateway_url}/v1/events")
    yield stream
    stream.close()


def _until(stream: EventStream, kind: str, **fields: Any) -> list[Event]:
    """Frames up to and including the first of ``kind`` whose data holds ``fields``."""
    seen: list[Event] = []
    while (event := stream.next(timeout_s=60)) is not None:
        seen.append(event)
        if event[0] == kind and fields.items() <= event[1].items():
            return seen
    raise AssertionError(f"no {kind} event with {fields}; got {seen}")


def test_a_real_execution_is_announced_finished_and_its_capability_learned(
    stack: E2EStack, events: EventStream
) -> None:
    with stack.client() as client:
        # The stream subscribes a moment after it answers: add capabilities until one is seen.
        for i in range(60):
            created = client.post(
                "/v1/capabilities", json={"code": f"return {i}", "intent": f"number {i}"}
            )
            assert created.status_code == 201, created.text
            if (seen := events.next(timeout_s=1)) is not None:
                break
        assert seen is not None and seen[0] == "capability.learned"
        assert set(seen[1]) == {"capability_id", "name", "version"}
        while events.next(timeout_s=1) is not None:  # the other sync capabilities' events
            pass

        body = {
            "code": "return await mcp.example.add(a=args['a'], b=args['b'])",
            "intent": "add two numbers together",
            "args": {"a": 2, "b": 3},
        }
        done = client.post("/v1/executions", params={"wait": "true"}, json=body).json()
    # Learned: a new capability, or the next version of one an earlier test of this tenant
    # taught with the same calls.
    assert done["status"] == "succeeded", done
    assert done["capability"]["status"] in CREATED_STATUSES, done
    frames = _until(events, "capability.learned", capability_id=done["capability"]["id"])
    finished = [data for kind, data in frames if kind == "execution.finished"]
    assert finished == [
        {
            "execution_id": done["id"],
            "status": "succeeded",
            "duration_ms": pytest.approx(done["duration_ms"], abs=1.0),
            "cache_hit": False,
            "capability_id": None,
            "mcp_task_id": None,  # REST, not an MCP task
        }
    ]
    with stack.client() as client:  # (version 1, or the next of a capability making these calls)
        version = client.get(f"/v1/capabilities/{done['capability']['id']}").json()["version"]
    assert frames[-1][1] == {
        "capability_id": done["capability"]["id"],
        "name": done["capability"]["name"],
        "version": version,
    }
    # The same code again updates the capability's stats; a rename is an update too.
    with stack.client() as client:
        again = client.post(
            "/v1/executions", params={"wait": "true"}, json={**body, "args": {"a": 1, "b": 1}}
        ).json()
        assert again["capability"]["status"] == "updated", again
        frames = _until(events, "capability.updated", capability_id=done["capability"]["id"])
        assert [data["execution_id"] for kind, data in frames if kind == "execution.finished"] == [
            again["id"]
        ]
        assert not [kind for kind, _ in frames if kind == "capability.learned"]
        renamed = client.patch(
            f"/v1/capabilities/{done['capability']['id']}", json={"name": "add_pair"}
        )
        assert renamed.status_code == 200, renamed.text
    assert _until(events, "capability.updated", name="add_pair")[-1][1] == {
        "capability_id": done["capability"]["id"],
        "name": "add_pair",
        "version": version,
    }


def test_a_failed_capability_run_moves_the_threshold_and_says_so(
    stack: E2EStack, events: EventStream
) -> None:
    """A matched capability that fails on a re-run was a false positive: the tenant's matching
    threshold rises, and the stream carries the move with its old and new values."""
    with stack.client() as client:
        body = {
            "code": "return await mcp.example.divide(a=args['a'], b=args['b'])",
            "intent": "divide a by b",
            "args": {"a": 6, "b": 3},
        }
        learned = client.post("/v1/executions", params={"wait": "true"}, json=body).json()
        cap_id = learned["capability"]["id"]
        _until(events, "capability.learned", capability_id=cap_id)
        failed = client.post(
            f"/v1/capabilities/{cap_id}/execute",
            params={"wait": "true"},
            json={"args": {"a": 1, "b": 0}},
        ).json()
    assert failed["status"] == "failed", failed
    frames = _until(events, "threshold.changed")
    moved = frames[-1][1]
    assert set(moved) == {"old", "new"} and moved["new"] > moved["old"], moved
    # (the version: code making the same calls as an earlier capability of this shared stack's
    # tenant is that capability's next version)
    with stack.client() as client:
        version = client.get(f"/v1/capabilities/{cap_id}").json()["version"]
    assert ("capability.updated", {"capability_id": cap_id, "name": learned["capability"]["name"],
            "version": version}) in frames  # fmt: skip


def test_the_cli_lists_shows_exports_and_imports(
    stack: E2EStack, tmp_path: Path, cli: CliRunner
) -> None:
    runner = cli
    with stack.client() as client:
        created = client.post(
            "/v1/capabilities",
            json={"code": 'return "pong"', "intent": "answer a ping", "name": "pong"},
        ).json()
    listed = runner.invoke(capabilities_app, ["list", "--q", "ping"])
    assert listed.exit_code == 0, listed.output
    # The table folds long cells to the terminal's width: the id's head is on one line.
    assert "1 capabilities" in listed.output and "pong" in listed.output
    assert created["id"][:8] in listed.output
    as_json = runner.invoke(capabilities_app, ["list", "--q", "ping", "--json"])
    assert [c["id"] for c in json.loads(as_json.output)["capabilities"]] == [created["id"]]
    shown = runner.invoke(capabilities_app, ["show", "pong"])
    assert shown.exit_code == 0 and 'return "pong"' in shown.output
    bundle = tmp_path / "bundle.json"
    exported = runner.invoke(
        capabilities_app, ["export", "--ids", created["id"], "-o", str(bundle)]
    )
    assert exported.exit_code == 0, exported.output
    assert [c["name"] for c in json.loads(bundle.read_text())["capabilities"]] == ["pong"]
    imported = runner.invoke(capabilities_app, ["import", str(bundle)])
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output) == {"created": 0, "merged": 1}
    missing = runner.invoke(capabilities_app, ["show", "no_such_thing"])
    assert missing.exit_code == 1 and "not_found" in missing.output
