"""Embeddings served by the gateways to the processes that need a few: one model in memory.

Torch and the model cost a process about half a GiB. The gateway holds them anyway (a search
embeds its query in-process, for latency); with ``AGENTCARDS_EMBEDDINGS_FROM=gateway`` the
toolhost (tool descriptions at sync) and the learning workers (intents) push their texts onto
``agentcards:embed:requests`` and a gateway's ``EmbeddingServer`` thread answers on
``agentcards:embed:reply:<id>``, as the tool-call RPC does. A serving gateway beats
``agentcards:heartbeat:embedder:<host>:<pid>`` (the model's name). An asker that sees no beat
``STARTUP_GRACE_S`` into a request, or no answer by ``REQUEST_TIMEOUT_S``, loads the model
itself (logged) and keeps it: heavier, never wrong.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import orjson
import redis

from shared.config import Settings
from shared.embeddings.embedder import Embedder, Embeds, get_embedder
from shared.queues import EMBED_REPLY_PREFIX, EMBED_REQUESTS, EMBED_SERVER_PREFIX

log = logging.getLogger(__name__)

# A gateway that has just started loads its model before the first answer (~6 s idle,
# over a minute on a saturated 2-core machine); a big server's ~100 descriptions take
# well under a second. Waiting costs a background sync; giving up costs a second model.
REQUEST_TIMEOUT_S = 120.0
# No gateway beat this long into a request: none is starting either.
STARTUP_GRACE_S = 20.0
BEAT_EVERY_S = 5.0
BEAT_TTL_S = 15
REPLY_TTL_S = 60
POLL_S = 1  # BLPOP's wait: how often a server checks its stop flag, an asker the beats


class _NoAnswer(Exception):
    """Raised when no gateway embedded a request: the asker embeds it itself."""


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=POLL_S + 10, socket_connect_timeout=2)


class EmbeddingServer:
    """A gateway's thread that answers embedding requests with the gateway's own model."""

    def __init__(self, *, redis_url: str, embedder: Embedder) -> None:
        self._client = _client(redis_url)
        self._embedder = embedder
        self._beat_key = f"{EMBED_SERVER_PREFIX}{socket.gethostname()}:{os.getpid()}"
        self._stop = threading.Event()
        # Beats on a thread of their own: loading the model or a big batch must not let the
        # beat expire, or askers would give up on a gateway that is about to answer.
        self._threads = [
            threading.Thread(target=self._serve, name="embedding-server", daemon=True),
            threading.Thread(target=self._beat, name="embedding-server-beat", daemon=True),
        ]

    def start(self) -> EmbeddingServer:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop answering and withdraw the beat (askers then wait for another gateway)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=POLL_S + 10)
        with contextlib.suppress(redis.RedisError):  # else it expires
            self._client.delete(self._beat_key)
        self._client.close()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self._client.set(self._beat_key, self._embedder.model_name, ex=BEAT_TTL_S)
            except redis.RedisError as exc:
                log.warning("embedding server: beat failed (%s)", exc)
            self._stop.wait(BEAT_EVERY_S)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                popped = self._client.blpop([EMBED_REQUESTS], timeout=POLL_S)
                if popped:
                    self._answer(popped[1])
            except redis.RedisError as exc:
                log.warning("embedding server: Redis failed (%s); retrying", exc)
                self._stop.wait(POLL_S)
            except Exception:  # the thread must outlive any one request
                log.exception("embedding server: a request failed")

    def _answer(self, raw: bytes | str) -> None:
        try:
            request = orjson.loads(raw)
            request_id, model = str(request["id"]), str(request["model"])
            texts, deadline = request["texts"], float(request["deadline"])
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise TypeError("texts is not a list of strings")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            log.warning("embedding server: dropped a malformed request (%s)", exc)
            return
        if time.time() > deadline:
            return  # its asker gave up and embedded it itself
        reply: dict[str, Any]
        if model != self._embedder.model_name:
            reply = {
                "ok": False,
                "error": f"this gateway embeds with {self._embedder.model_name!r}, not {model!r}",
            }
        else:
            try:
                reply = {"ok": True, "vectors": self._embedder.embed(texts)}
            except Exception as exc:  # the asker falls back to its own model and logs why
                log.exception("embedding server: embedding %d texts failed", len(texts))
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        key = EMBED_REPLY_PREFIX + request_id
        pipe = self._client.pipeline(transaction=True)  # a reply never exists without its expiry
        pipe.rpush(key, orjson.dumps(reply))
        pipe.expire(key, REPLY_TTL_S)
        pipe.execute()


class GatewayEmbedder:
    """Embeds through the gateways' ``EmbeddingServer``; loads a model of its own only when
    none answers (and keeps using it)."""

    def __init__(
        self,
        settings: Settings,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
        startup_grace_s: float = STARTUP_GRACE_S,
    ) -> None:
        self.model_name = settings.embedding_model
        self.timeout_s = timeout_s
        self.startup_grace_s = startup_grace_s
        self._settings = settings
        self._client = _client(settings.redis_url or "")
        self._lock = threading.Lock()
        self._local: Embedder | None = None

    @property
    def local(self) -> bool:
        """True once this process fell back to a model of its own."""
        return self._local is not None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit vectors of ``texts`` in order, as the gateway's ``Embedder.embed`` gives them."""
        if not texts:
            return []
        if self._local is None:
            try:
                return self._ask(list(texts))
            except _NoAnswer as exc:
                log.warning("%s: loading the embedding model in this process", exc)
                with self._lock:
                    self._local = self._local or get_embedder(self._settings)
        return self._local.embed(texts)

    def _ask(self, texts: list[str]) -> list[list[float]]:
        request_id = uuid.uuid4().hex
        started = time.monotonic()
        request = {
            "id": request_id,
            "model": self.model_name,
            "texts": texts,
            "deadline": time.time() + self.timeout_s,
        }
        key = EMBED_REPLY_PREFIX + request_id
        try:
            self._client.rpush(EMBED_REQUESTS, orjson.dumps(request))
            while True:
                popped = self._client.blpop([key], timeout=POLL_S)
                if popped:
                    break
                waited = time.monotonic() - started
                if waited >= self.timeout_s:
                    raise _NoAnswer(f"no gateway embedded {len(texts)} texts in {waited:.0f} s")
                if waited >= self.startup_grace_s and not self._served():
                    raise _NoAnswer(f"no gateway serves embeddings with {self.model_name!r}")
        except redis.RedisError as exc:
            raise _NoAnswer(f"asking the gateways for embeddings failed ({exc})") from exc
        reply = orjson.loads(popped[1])
        if not reply.get("ok"):
            raise _NoAnswer(f"the gateway could not embed: {reply.get('error')}")
        vectors: list[list[float]] = reply["vectors"]
        return vectors

    def _served(self) -> bool:
        model = self.model_name.encode()
        keys = list(self._client.scan_iter(match=f"{EMBED_SERVER_PREFIX}*", count=100))
        return any(value == model for value in (self._client.mget(keys) if keys else []))


_gateway_embedders: dict[tuple[str, str], GatewayEmbedder] = {}
_lock = threading.Lock()


def embedder_for(settings: Settings) -> Embeds:
    """This process's embedder as ``AGENTCARDS_EMBEDDINGS_FROM`` says: its own model
    (``get_embedder``, loaded on first use) or the gateways' (``GatewayEmbedder``)."""
    if settings.embeddings_from == "self":
        return get_embedder(settings)
    key = (settings.embedding_model, settings.redis_url or "")
    with _lock:
        if key not in _gateway_embedders:
            _gateway_embedders[key] = GatewayEmbedder(settings)
        return _gateway_embedders[key]
