"""A request body read whole by a middleware that must see it before passing it on."""

from __future__ import annotations

from starlette.types import Message, Receive


async def buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The request body (already size-checked by the body guard) and a receive that replays it."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay
