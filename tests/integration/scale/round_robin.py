"""The tests' own load balancer in front of several gateway replicas: round-robin per HTTP
request (keep-alive on both sides, each request to the next replica) or per TCP connection
(each connection to the next replica, for as long as it lasts), with no affinity of any kind.
It runs in a thread of the test process; a replica that refuses connections is skipped."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Literal

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from deploy.launcher.embedded import free_port

Mode = Literal["request", "connection"]
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection"}


@dataclass
class RoundRobin:
    """The balancer's URL, and which replica each request (or connection) went to."""

    backends: list[str]  # "127.0.0.1:PORT"
    mode: Mode
    port: int = field(default_factory=free_port)
    chosen: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __post_init__(self) -> None:
        self._next = itertools.cycle(range(len(self.backends)))

    def pick(self) -> str:
        backend = self.backends[next(self._next)]
        self.chosen.append(backend)
        return backend

    async def _per_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        body = await request.body()
        headers = [(k, v) for k, v in request.headers.raw if k.decode().lower() not in _HOP]
        client: httpx.AsyncClient = self._client
        for _ in self.backends:  # a replica that is down: the next one
            url = f"http://{self.pick()}{request.url.path}"
            if request.url.query:
                url += f"?{request.url.query}"
            outgoing = client.build_request(request.method, url, headers=headers, content=body)
            try:
                answer = await client.send(outgoing, stream=True)
            except httpx.ConnectError:
                continue
            kept = [(k, v) for k, v in answer.headers.raw if k.decode().lower() not in _HOP]

            async def relay(answer: httpx.Response = answer) -> AsyncIterator[bytes]:
                try:
                    async for chunk in answer.aiter_raw():
                        yield chunk
                except httpx.HTTPError:  # the replica died mid-stream: so does this stream
                    return
                finally:
                    await answer.aclose()

            response = StreamingResponse(relay(), status_code=answer.status_code)
            response.raw_headers = kept
            await response(scope, receive, send)
            return
        await Response("no replica reachable", 502)(scope, receive, send)

    async def _per_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for _ in self.backends:
            host, port = self.pick().rsplit(":", 1)
            try:
                upstream = await asyncio.open_connection(host, int(port))
                break
            except OSError:
                continue
        if upstream is None:
            writer.close()
            return
        up_reader, up_writer = upstream

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            with contextlib.suppress(OSError):
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    @contextlib.contextmanager
    def running(self) -> Iterator[RoundRobin]:
        """Serve on ``self.port`` in a thread until the block ends."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        stop = asyncio.Event()

        async def main() -> None:
            if self.mode == "connection":
                server = await asyncio.start_server(self._per_connection, "127.0.0.1", self.port)
                ready.set()
                async with server:
                    await stop.wait()
                return
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=2))
            config = uvicorn.Config(
                self._per_request,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                interface="asgi3",
            )
            web = uvicorn.Server(config)
            serving = asyncio.ensure_future(web.serve())
            while not web.started:
                await asyncio.sleep(0.01)
            ready.set()
            await stop.wait()
            web.should_exit = True
            await serving
            await self._client.aclose()

        thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
        thread.start()
        ready.wait(10)
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(10)
