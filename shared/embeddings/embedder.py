"""One embedding model per process, loaded on first use, embedding in batches or planned passes."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from shared.config import Settings
from shared.embeddings.model import Model, load_model
from shared.embeddings.plan import MAX_PLAN_TEXTS, query_plan
from shared.errors import ConfigError

if TYPE_CHECKING:
    from shared.embeddings.encoders import Encoder

# Token rows (texts x padded width) of the passes `warm_passes` runs once: oneDNN builds a
# kernel for each input size on its first use (~3-4 ms of CPU), and 93 % of a search's passes
# have at most 64 rows (the real-server, LiveMCPBench, NESTFUL and BFCL requests, 3,033 of
# them); warming them all costs ~0.6 CPU-s once.
WARM_PASS_ROWS = 64

# 32 short intents per forward pass: the sentence-transformers default, and small
# enough that a batch stays well under 100 MB of activations on CPU.
DEFAULT_BATCH_SIZE = 32


class Embeds(Protocol):
    """What embedding callers use: the model's name (the cache's key) and vectors in order;
    an ``Embedder`` or the gateways' (``service.GatewayEmbedder``)."""

    model_name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class Embedder:
    """One loaded model; ``embed`` returns unit-length vectors (cosine = dot product)."""

    def __init__(
        self,
        *,
        model_name: str,
        expected_dim: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 1,
        query_workers: int = 1,
        backend: str = "torch",
        device: str = "cpu",
        models_dir: Path | None = None,
    ) -> None:
        self.model_name = model_name
        self.backend = backend
        self.device = device
        self.models_dir = models_dir
        self.threads = threads
        self.query_workers = query_workers
        self._pool: ThreadPoolExecutor | None = None
        self.expected_dim = expected_dim
        self.batch_size = batch_size
        self._model: Model | None = None
        self._encoder: Encoder | None = None
        self._encoder_chosen = False
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector dimension of the model (loads it)."""
        return self._load().dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Normalized embeddings of ``texts``, in order, computed in batches of similar length.

        Runs the model's weights directly, in bfloat16 where the CPU computes it natively
        (see ``encoders.fast_encoder``): about 2x faster than the model's own ``encode`` for a
        batch of short intents, cosine > 0.9999 with it.
        """
        if not texts:
            return []
        model, encoder = self._load(), self._fast_encoder()
        if encoder is None:
            return model.encode(texts, batch_size=self.batch_size)
        from shared.embeddings.encoders import run_batches  # imports torch, as the model did

        return run_batches(
            encoder, model.token_ids(texts), batch_size=self.batch_size, pad=model.pad_id
        )

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` for a search request's few texts, planned for latency rather than size.

        The texts are tokenised once and cut into forward passes by token count, so short
        clauses are not padded to a long query; with ``query_workers`` > 1 the passes run
        side by side on that many threads (``query_plan``), each pass on one core. More
        than ``MAX_PLAN_TEXTS`` texts are a batch: ``embed`` takes them.
        """
        if not texts:
            return []
        if len(texts) > MAX_PLAN_TEXTS:
            return self.embed(texts)
        model, encoder = self._load(), self._fast_encoder()
        if encoder is None:
            return model.encode(texts, batch_size=self.batch_size)
        from shared.embeddings.encoders import run_passes  # imports torch, as the model did

        ids, pad = model.token_ids(texts), model.pad_id
        plan = query_plan([len(i) for i in ids], workers=self.query_workers)
        vectors: dict[int, list[float]] = {}
        jobs = [
            self._query_pool().submit(run_passes, encoder, ids, passes, pad) for passes in plan[1:]
        ]
        vectors.update(run_passes(encoder, ids, plan[0], pad))  # this thread takes one share
        for job in jobs:
            vectors.update(job.result())
        return [vectors[i] for i in range(len(texts))]

    def warm_passes(self, *, rows: int = WARM_PASS_ROWS) -> None:
        """Run one pass of every size from 2 to ``rows`` token rows, so that a search's first
        text of a new length does not pay for building its kernel (loads the model)."""
        model, encoder = self._load(), self._fast_encoder()
        if encoder is None:
            return
        from shared.embeddings.encoders import run_passes

        # A pass's kernels depend on its rows (batch x width) only: one text per width.
        ids = [[model.pad_id] * width for width in range(2, rows + 1)]
        for i in range(len(ids)):
            run_passes(encoder, ids, [[i]], model.pad_id)

    def encode_reference(self, texts: Sequence[str]) -> list[list[float]]:
        """The model's float32 ``encode``: what ``embed`` approximates (cosine > 0.9999),
        for baselines and checks."""
        return self._load().encode(texts, batch_size=self.batch_size) if texts else []

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text as the model reads it, cut at its limit (loads the model)."""
        return self._load().token_ids(texts)

    def _query_pool(self) -> ThreadPoolExecutor:
        # Created on first use, after any fork: a thread pool does not survive one.
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=max(1, self.query_workers - 1), thread_name_prefix="embed-query"
                )
            return self._pool

    def _fast_encoder(self) -> Encoder | None:
        model = self._load()
        with self._lock:
            if not self._encoder_chosen:
                self._encoder, self._encoder_chosen = model.fast_encoder(), True
            return self._encoder

    def _load(self) -> Model:
        # Loaded on first use, not at import: Celery prefork children each load their
        # own copy after the fork (torch thread pools do not survive a fork).
        with self._lock:
            if self._model is None:
                self._model = load_model(
                    self.model_name,
                    threads=self.threads,
                    backend=self.backend,
                    device=self.device,
                    models_dir=self.models_dir,
                )
                dim = self._model.dim
                if self.expected_dim is not None and dim != self.expected_dim:
                    raise ConfigError(
                        f"embedding model {self.model_name!r} gives {dim}-d vectors but the "
                        f"database expects {self.expected_dim}: set AGENTCARDS_EMBEDDING_DIM "
                        "to match, or use the model the database was made with"
                    )
            return self._model


_embedders: dict[tuple[str, int, str, str], Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(settings: Settings) -> Embedder:
    """The process-wide Embedder for the configured model (the model loads on first embed)."""
    key = (
        settings.embedding_model,
        settings.vector_dim,
        settings.embedding_backend,
        settings.embedding_device,
    )
    with _embedders_lock:
        if key not in _embedders:
            _embedders[key] = Embedder(
                model_name=settings.embedding_model,
                expected_dim=settings.vector_dim,
                threads=settings.embedding_threads,
                query_workers=settings.query_embedding_workers,
                backend=settings.embedding_backend,
                device=settings.embedding_device,
                models_dir=settings.home / "models",
            )
        return _embedders[key]
