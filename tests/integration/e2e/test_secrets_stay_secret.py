"""A canary secret in settings and in MCP servers' env never shows in a log, a response or a metric."""

from __future__ import annotations

from pathlib import Path

from tests.harness import stop_all
from tests.integration.mcp_servers import crashing_server, example_server
from tests.stack import E2EStack, stack_fixture

CANARY = "canary-Zq8v3Xw7-do-not-leak"


secret_stack = stack_fixture(
    lambda tmp: {
        "example": example_server(tmp, EXAMPLE_API_TOKEN=CANARY),
        "crashy": crashing_server("fatal: cannot start") | {"env": {"CRASHY_TOKEN": CANARY}},
    },
    synced_servers=1,
    secret_key=CANARY,
    flower_basic_auth=f"admin:{CANARY}",
)


def test_the_canary_never_leaves(secret_stack: E2EStack) -> None:
    bodies: list[str] = []
    with secret_stack.client() as client:
        runs = [
            {"code": "return await mcp.example.add(a=1, b=2)", "intent": "add"},
            {"code": "raise ValueError('boom')"},
            {"code": "import os\nreturn dict(os.environ)"},
            {"code": "return await mcp.example.fail(message='nope')"},
            {"code": "return await mcp.crashy.anything()"},
            {"code": "x = (1,"},
        ]
        for body in runs:
            response = client.post("/v1/executions", params={"wait": "true"}, json=body)
            assert response.status_code < 500
            bodies.append(response.text)
        for path in ("/healthz", "/metrics", "/v1/tools", "/v1/servers", "/openapi.json"):
            bodies.append(client.get(path).text)
        bodies.append(client.post("/v1/tools/search", json={"query": "add"}).text)
    assert any("boom" in b for b in bodies) and any("crashy" in b for b in bodies)
    assert not [b[:300] for b in bodies if CANARY in b]
    stop_all(secret_stack.procs.values())  # flush and close every log first
    leaked = [
        str(path)
        for path in secret_stack.tmp.rglob("*")
        if path.is_file() and path.name != "mcp.json" and CANARY in _text(path)
    ]
    assert leaked == []
    assert CANARY in _text(secret_stack.tmp / "mcp.json")  # the scan reads what it should


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")
