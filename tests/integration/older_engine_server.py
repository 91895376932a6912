"""Our reference server (conformance_server.py) behind a 2026-07-28 front that answers tool
calls from an older engine, as the MCP conformance suite's own reference server
(``examples/servers/typescript/everything-server.ts``, not published to any registry) was
seen to answer on the wire (a test fixture, over streamable HTTP only):

- at 2026-07-28 a ``tools/call`` result carries no ``resultType`` (the revision requires it);
- such a tool cannot ask its client mid-call: where ours would return an
  ``InputRequiredResult`` it says ``Method not found`` in its text, as an SDK 1.x tool
  whose in-process client has no sampling or elicitation does;
- an unknown tool is an ``isError`` result (untagged), not a JSON-RPC error;
- the tools that answer with their own ``InputRequiredResult`` (``ROUND_TOOLS``) are served
  only at 2026-07-28: a 2025-11-25 session does not list them.

``python -m tests.integration.older_engine_server PORT`` serves it at ``/mcp``.
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.integration.conformance_server import ROUND_TOOLS, build

MODERN = "2026-07-28"
NOT_FOUND = "MCP error -32601: Method not found"


class OlderEngine:
    """ASGI middleware rewriting the answers a front over an older engine gives differently."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, messages = await _read_body(receive)
        request = _json(body)
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode()
        method = request.get("method") if isinstance(request, dict) else None
        params = request.get("params") or {} if isinstance(request, dict) else {}
        if version == MODERN and method == "tools/call" and params.get("name") not in ROUND_TOOLS:
            rewrite = _older_call
        elif version != MODERN and method == "tools/list":
            rewrite = _without_round_tools
        else:
            await self.app(scope, _replay(messages, receive), send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def buffered(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, _replay(messages, receive), buffered)
        out = _rewritten(b"".join(chunks), rewrite)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(out)).encode()))
        status = 200 if rewrite is _older_call else start.get("status", 200)  # errors as results
        await send({**start, "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": out})


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    return b"".join(m.get("body", b"") for m in messages), messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """The request's messages once more, then the client's own (its disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _rewritten(body: bytes, rewrite: Any) -> bytes:
    """The response (one JSON message, or SSE ``data:`` lines) with each message rewritten."""
    whole = _json(body)
    if whole is not None:
        return orjson.dumps(rewrite(whole))
    lines = []
    for line in body.split(b"\n"):
        message = _json(line[5:]) if line.startswith(b"data:") else None
        lines.append(b"data: " + orjson.dumps(rewrite(message)) if message is not None else line)
    return b"\n".join(lines)


def _older_call(message: dict[str, Any]) -> dict[str, Any]:
    if "error" in message:  # an unknown tool: an error result, as an SDK 1.x engine answers
        text = f"MCP error {message['error']['code']}: {message['error']['message']}"
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": result}
    result = message.get("result")
    if not isinstance(result, dict):
        return message  # a notification (progress, a log line): as it is
    if result.get("resultType") == "input_required":  # the engine had no one to ask
        result = {"content": [{"type": "text", "text": f"Not supported: {NOT_FOUND}"}]}
    result.pop("resultType", None)
    return {**message, "result": result}


def _without_round_tools(message: dict[str, Any]) -> dict[str, Any]:
    result = message.get("result")
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        result["tools"] = [t for t in result["tools"] if t.get("name") not in ROUND_TOOLS]
    return message


def main() -> None:
    import uvicorn

    app = OlderEngine(build().streamable_http_app(host="127.0.0.1"))
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", http="h11")


if __name__ == "__main__":
    main()
