"""Code that does not parse fails at submission as ``syntax_error`` at the user's line, never queued."""

from __future__ import annotations

import redis
from fastapi.testclient import TestClient

from shared.config import Settings


def _queued(settings: Settings) -> int:
    return int(redis.Redis.from_url(settings.redis_url or "").llen("executions"))


def test_a_syntax_error_fails_at_once_with_line_and_column(
    client: TestClient, settings: Settings
) -> None:
    response = client.post("/v1/executions", json={"code": "x = 1\nawait f(\n"})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failed"
    error = body["error"]
    assert error["type"] == "syntax_error"
    assert error["details"]["line"] == 2 and error["details"]["column"] == 8
    assert error["message"].startswith("SyntaxError at line 2, column 8")
    assert _queued(settings) == 0
    stored = client.get(f"/v1/executions/{body['id']}").json()
    assert stored["status"] == "failed" and stored["error"] == error


def test_an_indentation_error_is_a_syntax_error(client: TestClient, settings: Settings) -> None:
    response = client.post("/v1/executions", json={"code": "for i in range(3):\nprint(i)"})
    error = response.json()["error"]
    assert error["type"] == "syntax_error" and error["details"]["line"] == 2
    assert error["message"].startswith("IndentationError")
    assert _queued(settings) == 0


def test_top_level_await_and_return_are_not_syntax_errors(
    client: TestClient, settings: Settings
) -> None:
    response = client.post("/v1/executions", json={"code": "x = await f()\nreturn x"})
    assert response.status_code == 202 and response.json()["status"] == "queued"
    assert _queued(settings) == 1


def test_a_typescript_syntax_error_fails_at_once_in_the_agents_numbering(
    client: TestClient, settings: Settings
) -> None:
    code = "const a: number = 1;\nconst b = a +;\nreturn b;"
    response = client.post("/v1/executions", json={"code": code, "language": "typescript"})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failed" and body["language"] == "typescript"
    error = body["error"]
    assert error["type"] == "syntax_error"
    assert error["details"]["line"] == 2 and error["details"]["column"] == 13
    assert _queued(settings) == 0
    assert client.get(f"/v1/executions/{body['id']}").json()["error"] == error


def test_valid_typescript_and_what_only_deno_can_judge_are_queued(
    client: TestClient, settings: Settings
) -> None:
    for code in (
        "const r: number = await f();\nreturn r;",
        "interface I<in out T> { x: T }\nreturn 1;",  # newer than the gateway's grammar
        "if (true) {\nreturn 1;",  # unbalanced: the sandbox's Deno names the place
    ):
        response = client.post("/v1/executions", json={"code": code, "language": "typescript"})
        assert response.status_code == 202 and response.json()["status"] == "queued", code
    assert _queued(settings) == 3
