"""A bench-only arm of issue 31: a linear adapter on the query embedding, per tenant.

W (d x d) starts at the identity and is trained contrastively on the tenant's learned
(intent, tool) pairs: the intent mapped by W should be closer to its tool's description
than to any other tool's (softmax over the catalogue, temperature TAU), with weight decay
toward the identity (``decay`` x ||W - I||^2), full batch, Adam, EPOCHS steps on one core.
A search then ranks by cosine(normalise(W q), description). Not shipped: the ablation in
docs/search.md decides.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from deploy.bench.search_fit import Judged, Learned
from shared.search.hybrid import MIN_CANDIDATES, Evidence

TAU = 0.05
EPOCHS = 100
LEARNING_RATE = 1e-3
DECAYS = (0.01, 0.1, 1.0)
FITTED_DECAY = 0.01  # the validation fit's (``fit_adapter`` in search_recall --fit, 2026-11-26)

_ADAPTERS: dict[tuple[int, float], np.ndarray] = {}


def train_adapter(learned: Learned, *, decay: float) -> np.ndarray:
    """W fitted on ``learned``'s runs (cached per protocol point and ``decay``)."""
    cache = (id(learned), decay)
    if cache in _ADAPTERS:
        return _ADAPTERS[cache]
    import torch

    torch.set_num_threads(1)
    names = list(learned.descriptions)
    index = {t: i for i, t in enumerate(names)}
    pairs = [(r.vector, index[t]) for r in learned.runs for t in r.tools if t in index]
    dim = len(next(iter(learned.descriptions.values())))
    if not pairs:
        _ADAPTERS[cache] = np.eye(dim, dtype=np.float32)
        return _ADAPTERS[cache]
    x = torch.tensor(np.stack([np.asarray(v, np.float32) for v, _ in pairs]))
    y = torch.tensor([i for _, i in pairs])
    d = torch.tensor(np.stack([np.asarray(learned.descriptions[t], np.float32) for t in names]))
    identity = torch.eye(dim)
    w = identity.clone().requires_grad_(True)
    optimiser = torch.optim.Adam([w], lr=LEARNING_RATE)
    for _ in range(EPOCHS):
        q = torch.nn.functional.normalize(x @ w.T, dim=1)
        loss = torch.nn.functional.cross_entropy(q @ d.T / TAU, y)
        loss = loss + decay * ((w - identity) ** 2).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    _ADAPTERS[cache] = w.detach().numpy().astype(np.float32)
    return _ADAPTERS[cache]


def with_adapter(judged: Judged, *, decay: float) -> Evidence:
    """The evidence with the dense list recomputed for the adapted query (exact, over the
    catalogue); the other features as searched (they do not depend on the query vector,
    except the clause one, kept as it was)."""
    evidence = judged.evidence
    if judged.learned is None or judged.vector is None or not judged.learned.runs:
        return evidence
    w = train_adapter(judged.learned, decay=decay)
    adapted = w @ np.asarray(judged.vector, np.float32)
    adapted /= float(np.linalg.norm(adapted)) or 1.0
    names = list(judged.learned.descriptions)
    matrix = np.stack([judged.learned.descriptions[t] for t in names])
    sims = matrix @ adapted
    top = np.argsort(-sims, kind="stable")[:MIN_CANDIDATES]
    dense = {names[i]: float(sims[i]) for i in top}
    features = {tool: dict(values) for tool, values in evidence.features.items()}
    for tool in dense:
        features.setdefault(tool, {})
    return replace(evidence, dense=dense, features=features)
