"""ASGI middleware that refuses hostile input before any parser sees it: NUL in the URL, huge or deeply nested bodies.

It wraps the whole app (REST and /mcp alike), reads a body once up to the size cap, scans
its nesting iteratively and replays it; FastAPI, pydantic and the MCP SDK then only ever
parse bodies that cannot hit Python's recursion limit.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from anyio import to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.errors import error_response
from shared.errors import AgentCardsError, BodyTooLarge, NestingTooDeep, ValidationFailed
from shared.inputs import BODY_DEPTH, VALUE_DEPTH, nesting_exceeds

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
THREAD_SCAN_BYTES = 64 << 10


class BodyGuard:
    """Refuse, in our error envelope, what would crash or reach Postgres as NUL further in."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            _check_url(scope)
            if scope["method"] not in BODY_METHODS:
                await self.app(scope, receive, send)
                return
            body, more = await self._read_body(scope, receive)
        except AgentCardsError as exc:
            await error_response(exc)(scope, receive, send)
            return
        if await _too_deep(body):
            too_deep = NestingTooDeep(
                f"the JSON body nests deeper than {BODY_DEPTH} levels; values such as args "
                f"may nest at most {VALUE_DEPTH} levels",
                field="body",
                limit=BODY_DEPTH,
                value_limit=VALUE_DEPTH,
            )
            await error_response(too_deep)(scope, receive, send)
            return
        await self.app(scope, _replay(body, more, receive), send)

    async def _read_body(self, scope: Scope, receive: Receive) -> tuple[bytes, bool]:
        """The whole body (refused past the cap, by Content-Length or by what arrives)."""
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                raise self._too_large(int(value))
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # disconnected: let the app see it
                return b"".join(chunks), False
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large(size)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), True

    def _too_large(self, size: int) -> BodyTooLarge:
        return BodyTooLarge(
            f"the request body is {size} bytes or more; the limit is {self.max_body_bytes}",
            limit=self.max_body_bytes,
        )


async def _too_deep(body: bytes) -> bool:
    # A scan costs ~40 ms per MB: large bodies are scanned off the event loop.
    if len(body) > THREAD_SCAN_BYTES:
        return await to_thread.run_sync(nesting_exceeds, body, BODY_DEPTH)
    return nesting_exceeds(body, BODY_DEPTH)


def _check_url(scope: Scope) -> None:
    """NUL in the path or query string would reach Postgres as a name or an id."""
    if "\x00" in scope.get("path", ""):
        raise ValidationFailed("the URL path must not contain a NUL character", field="path")
    if b"\x00" in unquote_to_bytes(scope.get("query_string", b"")):
        raise ValidationFailed("the query string must not contain a NUL character", field="query")


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A receive() that hands the app the buffered body, then passes on (disconnects)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent and complete:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
